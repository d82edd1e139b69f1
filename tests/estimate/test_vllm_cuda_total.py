"""vLLM sizes its pool on CUDA's total, not nvidia-smi's (probe23 D2); vLLM's Triton MXFP4 experts hold more than
the checkpoint (probe23 D3).

D2: vLLM's requested memory is ceil(MemorySnapshot.total_memory x gpu_memory_utilization) (vllm 0.19.1
v1/worker/utils.py:408-410), total_memory torch.cuda.mem_get_info's (vllm/utils/mem_utils.py:104): nvidia-smi's
memory.total less the driver's reserve. The truth here is read from the published outputs themselves: nvidia-smi -q
'FB Memory Usage' Total and Reserved (tests/fixtures/real_outputs/nvidia-smi-q), the 79.18 GiB total vLLM logs on
H100 80GB in the llm-d rows (validation/vllm_startup_logs.csv), torch's total_memory of the project's H200 run
(validation/measured/gpu-h200-2026-12-04.jsonl).

D3: vLLM's "Model loading took" for gpt-oss on one H100: 13.47 GiB (20b, VL02) and 64.38 GiB (120b,
vllm-project/vllm#33155, vLLM 0.14.1), against the checkpoints' 12.82 / 60.77 GiB."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from llmsizer import estimate_inference
from llmsizer.catalog.hardware import load_catalog
from llmsizer.estimate.fit import fit
from llmsizer.formulas.vllm_mxfp4 import vllm_triton_mxfp4_extra_bytes

ROOT = Path(__file__).resolve().parents[2]
SMI = ROOT / "tests" / "fixtures" / "real_outputs" / "nvidia-smi-q"
GiB = 2**30
MiB = 2**20


def _fb(name: str) -> tuple[int, int]:
    """(Total, Reserved) MiB of nvidia-smi -q's 'FB Memory Usage' block."""
    text = (SMI / name).read_text()
    block = text[text.index("FB Memory Usage"):]
    total = int(re.search(r"Total\s*:\s*(\d+) MiB", block).group(1))  # type: ignore[union-attr]
    reserved = int(re.search(r"Reserved\s*:\s*(\d+) MiB", block).group(1))  # type: ignore[union-attr]
    return total, reserved


@pytest.mark.parametrize(("device", "capture"), [("h100-sxm", "h100-80gb-hbm3.txt"), ("l40s", "l40s.txt"),
                                                 ("rtx-4080-super", "rtx-4080-super.txt")])
def test_the_catalog_cuda_total_is_the_capture_total_less_the_reserve(device: str, capture: str) -> None:
    total, reserved = _fb(capture)
    dev = load_catalog().device(device)
    assert dev.memory_bytes == total * MiB  # the driver-reported memory the rest of llmsizer reads
    assert dev.memory_cuda is not None and dev.memory_cuda.base == (total - reserved) * MiB


def test_the_h100_cuda_total_is_the_total_vllm_logs() -> None:
    rows = list(csv.DictReader((ROOT / "validation" / "vllm_startup_logs.csv").open()))
    logged = {float(r["gpu_total_gib"]) for r in rows if r["gpu"] == "H100 80GB"}
    dev = load_catalog().device("h100-sxm")
    assert dev.memory_cuda is not None
    assert logged == {round(dev.memory_cuda.base / GiB, 2)}  # vLLM's format_gib: two decimals


def test_the_h200_cuda_total_is_torchs() -> None:
    line = (ROOT / "validation" / "measured" / "gpu-h200-2026-12-04.jsonl").read_text().splitlines()[0]
    device = json.loads(line)["device"]
    dev = load_catalog().device("h200")
    assert dev.memory_cuda is not None and dev.memory_cuda.base == device["total_memory_bytes"]
    assert dev.memory_bytes == device["nvml_total_bytes"]  # nvidia-smi's, the catalog's memory


def test_vllm_on_a_named_h100_pools_on_cuda_total() -> None:
    """`infer gpt-oss-20b --engine vllm --device h100-sxm --context 16000` sized 0.9 x 79.65 GiB (nvidia-smi's); the
    pool is 0.9 x CUDA's total, the same as with the logged 79.18 GiB given, and infer and fit agree."""
    total, reserved = _fb("h100-80gb-hbm3.txt")
    named = estimate_inference("gpt-oss-20b", engine="vllm", device="h100-sxm", context=16000)
    given = estimate_inference("gpt-oss-20b", engine="vllm", memory=(total - reserved) * MiB, context=16000)
    smi = estimate_inference("gpt-oss-20b", engine="vllm", memory=total * MiB, context=16000)
    assert named.details["kv_pool_bytes"] == given.details["kv_pool_bytes"]
    assert smi.details["kv_pool_bytes"] - named.details["kv_pool_bytes"] == pytest.approx(0.9 * reserved * MiB, abs=1)
    fitted = fit("gpt-oss-20b", "h100-sxm", engine="vllm", context=16000).estimate
    assert fitted.details["kv_pool_bytes"] == named.details["kv_pool_bytes"]
    said = next(a for a in named.assumptions if a.name == "cuda_total_memory")
    assert said.value == "79.18 GiB" and "479" in said.why


def test_a_given_memory_is_taken_as_cuda_total_and_said() -> None:
    est = estimate_inference("gpt-oss-20b", engine="vllm", device="h100-sxm", memory="80GiB", context=16000)
    assert est.details["kv_pool_bytes"] == estimate_inference("gpt-oss-20b", engine="vllm", memory="80GiB",
                                                              context=16000).details["kv_pool_bytes"]
    said = next(a for a in est.assumptions if a.name == "cuda_total_memory")
    assert said.value == "80.00 GiB" and "taken as the memory" in said.why


def test_sglang_free_memory_is_of_cuda_total_its_fraction_of_nvidia_smi() -> None:
    """SGLang's default mem_fraction_static reads nvidia-smi's memory.total (get_nvgpu_memory_capacity); its pool the
    free memory torch reports (get_available_gpu_memory): of CUDA's total."""
    total, reserved = _fb("h100-80gb-hbm3.txt")
    named = estimate_inference("llama-3.1-8b", engine="sglang", device="h100-sxm", context=8192)
    smi = estimate_inference("llama-3.1-8b", engine="sglang", memory=total * MiB, context=8192)
    assert named.details["mem_fraction_static"] == smi.details["mem_fraction_static"]
    fraction = named.details["mem_fraction_static"]
    assert smi.details["kv_pool_bytes"] - named.details["kv_pool_bytes"] == pytest.approx(fraction * reserved * MiB,
                                                                                          abs=2)


# D3: the logged weights; the bytes of eq. X1 worked from vLLM's shapes here, not read from llmsizer
@pytest.mark.parametrize(("model", "logged_gib", "layers", "experts"), [("gpt-oss-20b", 13.47, 24, 32),
                                                                         ("gpt-oss-120b", 64.38, 36, 128)])
def test_vllm_mxfp4_weights_meet_the_load_logs(model: str, logged_gib: float, layers: int, experts: int) -> None:
    h = i = 2880
    # per expert: swizzled scales, rows padded to 256 (Hopper layout, num_warps 8): 2I = 5760 -> 5888, H -> 3072,
    # 90 groups of 32 each; float32 biases instead of bf16: +2 B x (2I + H)
    per_expert = 5888 * (h // 32) + 3072 * (i // 32) + 2 * (2 * i + h)
    assert vllm_triton_mxfp4_extra_bytes(layers, experts, h, i) == layers * experts * per_expert
    est = estimate_inference(model, engine="vllm", memory="79.18GiB", context=16000)
    weights = est.item("weights").bytes
    # the resident weights: the plan's "weights per device" (details) and the weights item say the same bytes
    assert weights == est.details["weights_bytes"]
    assert est.details["weights_by_storage"]["vLLM Triton swizzled scales + fp32 biases (eq. X1)"] == (
        layers * experts * per_expert)
    assert abs(weights / GiB - logged_gib) / logged_gib < 0.01  # was -4.9 % (20b) and -5.6 % (120b)
    assert any(a.name == "vllm_mxfp4_backend" for a in est.assumptions)


def test_gpt_oss_120b_leaves_no_pool_on_one_h100() -> None:
    """vllm#33155 (0.14.1): gpt-oss-120b on one H100 runs out of memory; vllm#23278 'Available KV cache memory:
    -2.14 GiB'. Before, llmsizer admitted 10 sequences there."""
    est = estimate_inference("gpt-oss-120b", engine="vllm", device="h100-sxm")
    assert est.details["kv_pool_bytes"] < 0 and "vllm_no_pool" in est.details
