"""Every GPU row states its architecture, and every NVIDIA row its compute capability (Device.capability), which the
rules keyed on a GPU generation read: vLLM's and SGLang's capability gates (estimate/formats.py), llama.cpp's
flash-attention kernel choice (formulas/flash_attention.py), the training utilisation by architecture.

Independent truth: NVIDIA's "CUDA GPU Compute Capability" table (developer.nvidia.com/cuda-gpus, retrieved
2026-12-02; V100 on the legacy page), written out here by hand, not read from the catalog: "blackwell" is not one
capability (B200/GB200 10.0, B300 10.3, GeForce RTX 50 and RTX PRO 6000 Blackwell 12.0, GB10 12.1).
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import ARCHITECTURE_CAPABILITY, builtin_catalog, load_catalog
from llmsizer.estimate.formats import engine_refuses
from llmsizer.formulas.flash_attention import CC_ADA_LOVELACE, MMA_F16, VEC, fattn_kernel

CAT = builtin_catalog()

# NVIDIA's table (major.minor), by the product names it lists
NVIDIA_TABLE = {
    "rtx-5090": 12.0, "rtx-5080": 12.0, "rtx-5070-ti": 12.0, "rtx-5070": 12.0, "rtx-5060-ti-16gb": 12.0,
    "rtx-5060-ti-8gb": 12.0, "rtx-5060": 12.0, "rtx-5050": 12.0, "rtx-pro-6000-workstation": 12.0,
    "rtx-pro-6000-server": 12.0, "dgx-spark": 12.1, "b300": 10.3, "b200": 10.0, "gb200": 10.0,
    "h200": 9.0, "h100-sxm": 9.0, "h100-pcie": 9.0, "h100-nvl": 9.0, "l4": 8.9, "l40": 8.9, "l40s": 8.9,
    "rtx-4090": 8.9, "rtx-6000-ada": 8.9, "a10": 8.6, "rtx-3090": 8.6, "rtx-a6000": 8.6, "a100-sxm-80gb": 8.0,
    "a100-pcie-40gb": 8.0, "t4": 7.5, "v100-sxm2-32gb": 7.0,
}
# the capabilities NVIDIA's table lists under each architecture's products (Jetson parts left out)
ARCH_CAPABILITIES = {"volta": {70}, "turing": {75}, "ampere": {80, 86}, "ada": {89}, "hopper": {90},
                     "blackwell": {100, 103, 120, 121}}
# GPU rows with no NVIDIA compute capability: AMD's architecture is read by no rule today (the capability gates and
# llama.cpp's CUDA kernel choice are NVIDIA's); their 'architecture' names the CDNA generation for people
NOT_NVIDIA = {"AMD"}


def test_every_gpu_row_names_its_architecture() -> None:
    gpus = [d for d in CAT.devices.values() if d.kind == "gpu"]
    assert gpus
    assert [d.id for d in gpus if not d.architecture] == []


def test_every_nvidia_row_states_a_sourced_capability_of_its_architecture() -> None:
    for d in CAT.devices.values():
        if d.kind != "gpu":
            continue
        if d.vendor in NOT_NVIDIA:
            assert d.compute_capability is None and d.capability is None, d.id
            continue
        assert d.vendor == "NVIDIA", d.id
        cc = d.compute_capability
        assert cc is not None and cc.source and cc.date, d.id
        assert d.capability in ARCH_CAPABILITIES[d.architecture], (d.id, d.architecture, d.capability)


@pytest.mark.parametrize(("device", "major_minor"), sorted(NVIDIA_TABLE.items()))
def test_capability_is_nvidias(device: str, major_minor: float) -> None:
    assert CAT.devices[device].capability == round(major_minor * 10)


def test_a_hardware_file_naming_only_the_architecture_gets_its_first_capability(tmp_path) -> None:
    f = tmp_path / "hw.json"
    f.write_text('{"devices": [{"id": "my-gpu", "name": "My GPU", "kind": "gpu", "architecture": "ada", '
                 '"memory": "24GiB"}, {"id": "my-5090", "name": "My 5090", "kind": "gpu", "architecture": '
                 '"blackwell", "compute_capability": 12.0, "memory": "32GiB"}]}')
    cat = load_catalog([f])
    assert cat.devices["my-gpu"].capability == ARCHITECTURE_CAPABILITY["ada"] == 89
    assert cat.devices["my-5090"].capability == 120


def test_sm120_passes_the_engine_gates_and_takes_the_ada_kernels() -> None:
    """By mechanism: vLLM's gates ask for at least 7.5/8.0 (estimate/formats.py), which 12.0 passes; ggml-cuda's
    fattn choice compares only with Turing/Volta/Ada (fattn.cu ggml_cuda_get_best_fattn_kernel, ggml-org/ggml@d99724f
    L358 ff.), so 12.0 takes the same kernel as 8.9 and 10.0 (vec for one sequence of one token, else mma_f16)."""
    t4, rtx5090 = CAT.devices["t4"], CAT.devices["rtx-5090"]
    assert engine_refuses("vllm", "mxfp4", t4) is not None  # 7.5 < 8.0
    assert "compute capability 7.5" in str(engine_refuses("vllm", "mxfp4", t4))
    assert engine_refuses("vllm", "mxfp4", rtx5090) is None
    assert rtx5090.capability is not None and rtx5090.capability * 10 >= CC_ADA_LOVELACE
    for cc in (890, 1000, 1030, 1200, 1210):
        assert fattn_kernel(128, 32, 8, 1, 1, 4096, cc) == VEC
        assert fattn_kernel(128, 32, 8, 1, 8, 4096, cc) == MMA_F16
