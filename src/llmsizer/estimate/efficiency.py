"""Efficiency factors: the share of a device's peak that real kernels reach, as named, cited defaults.

Each is a ``Factor`` (low, expected, high) with the published measurement or tool constant it comes from,
following ``estimate/engines.py``. Only the four llama.cpp decode constants are calibrated on validation rows (named
below, and left out of the error summary); every other factor comes from outside llmsizer's validation rows
(tests/validation/), which only measure how far these defaults land.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Factor:
    name: str
    low: float
    expected: float
    high: float
    source: str

    def to_dict(self) -> dict[str, float | str]:
        return {"name": self.name, "low": self.low, "expected": self.expected, "high": self.high, "source": self.source}


# Decode streams weights + KV from memory. NVIDIA AIConfigurator scales the datasheet bandwidth by
# mem_bw_empirical_scaling_factor = 0.8 in its system files (shared/research/anchors.md, H200 system YAML).
# llmfit's whole speed model is bandwidth / model size x 0.55 (low end).
DECODE_BANDWIDTH_GPU = Factor(
    "decode_bandwidth_efficiency_gpu", 0.55, 0.80, 0.90,
    "NVIDIA AIConfigurator systems/*.yaml mem_bw_empirical_scaling_factor 0.8; llmfit uses 0.55")

# llama.cpp decode on a GPU or Apple silicon, eq. (7) of formulas/speed.py: t = bytes / (B x eta) + L x tau.
# CALIBRATED (the only speed constants that are): least squares of that form over four llama-bench rows,
# Llama-3-8B Q4_K_M and F16 tg512 on RTX 3090 and RTX 4090 (XiongjieDai/GPU-Benchmarks-on-LLM-Inference README
# @00dd2bd, May 2024 build) -> eta 0.923, tau 91.3 us per layer (each GPU alone: eta 0.893 / 0.975, tau 96.9 /
# 91.4 us). Apple (Metal) from the two M2 Ultra rows of the same table -> eta 0.901, tau 195 us. The calibration rows
# are marked as such in tests/validation/test_public_speed.py and left out of the error summary; the other rows
# (DGX Spark, H100-PCIe, RTX A6000, LLaMA-2 rows, M1/M3) are held out. Re-derived from the rows by
# tests/hardware/test_efficiency_calibration.py. Replaces a flat 0.55 x bandwidth (llmfit), which had no
# per-layer term and so erred by -30 % on 4B-8B models on DGX Spark and +117 % on H100-PCIe Q4_0.
LLAMACPP_DECODE_BANDWIDTH = Factor(
    "llamacpp_decode_bandwidth_efficiency", 0.893, 0.923, 0.975,
    "calibrated: llama-bench Llama-3-8B Q4_K_M/F16 tg512 on RTX 3090 + RTX 4090 (XiongjieDai README @00dd2bd)")
# Ranges: the envelope of the joint fit and each GPU's own fit (a longer overhead is the slow end). Apple has one
# calibration device, so no spread is claimed (low = expected = high).
LLAMACPP_LAYER_OVERHEAD_GPU = Factor(
    "llamacpp_decode_overhead_per_layer_gpu", 96.9e-6, 91.3e-6, 91.3e-6,
    "calibrated with llamacpp_decode_bandwidth_efficiency (same four rows); seconds per layer per step")
LLAMACPP_DECODE_BANDWIDTH_APPLE = Factor(
    "llamacpp_decode_bandwidth_efficiency_apple", 0.901, 0.901, 0.901,
    "calibrated: llama-bench Llama-3-8B Q4_K_M/F16 tg512 on M2 Ultra (XiongjieDai README @00dd2bd)")
LLAMACPP_LAYER_OVERHEAD_APPLE = Factor(
    "llamacpp_decode_overhead_per_layer_apple", 195e-6, 195e-6, 195e-6,
    "calibrated with llamacpp_decode_bandwidth_efficiency_apple (same two rows); seconds per layer per step")

# CPU decode: a llama.cpp user measured about 35 GB/s on dual-channel DDR5-4800 (76.8 GB/s theoretical),
# 35 / 76.8 = 0.46 (ai-radar.it, 'ottimizzare modelli MoE su CPU', in shared/research/hardware_notes.md §5).
DECODE_BANDWIDTH_CPU = Factor(
    "decode_bandwidth_efficiency_cpu", 0.35, 0.46, 0.65,
    "ai-radar.it: ~35 GB/s of 76.8 GB/s in llama.cpp on desktop DDR5 (35 / 76.8 = 0.46)")

# Prefill and batched decode are matrix-matrix products. PyTorch's RuntimeEstimator cost model divides FLOPs
# by 0.75 x peak (torch/distributed/_tools/runtime_estimator.py, operator-level-cost-model); gpu_poor uses 0.85.
COMPUTE = Factor(
    "compute_efficiency", 0.50, 0.75, 0.85,
    "PyTorch RuntimeEstimator operator-level-cost-model: flops / (0.75 x peak); gpu_poor 0.85")

# Training utilisation. Megatron-LM PTD-P on A100 (Narayanan et al. 2021, Table 1, 10 rows from 1.7B to 1T
# parameters, 32-3072 GPUs): 43-52 % of peak counting recomputation FLOPs, median 45.5 % -> hardware FLOPs
# utilisation to use with the recompute FLOP count.
TRAINING_HFU = Factor(
    "training_hardware_flops_utilization", 0.43, 0.455, 0.52,
    "Narayanan et al. 2021 (arXiv 2104.04473) Table 1: 43-52 % of peak, median 45.5 % (recompute counted)")
# PaLM 540B trained at 46.2 % model FLOPs utilisation (Chowdhery et al. 2022, arXiv 2204.02311, Table 3);
# used with the no-recompute FLOP count.
TRAINING_MFU = Factor(
    "training_model_flops_utilization", 0.30, 0.462, 0.55,
    "Chowdhery et al. 2022 (PaLM) Table 3: 46.2 % MFU; Megatron Table 1 range as the high end")

# Apple GPUs may use about 70-78 % of unified memory (Metal recommendedMaxWorkingSetSize: 70 % on a 32 GB
# M1 Max, ~78 % on larger configurations; XiongjieDai/GPU-Benchmarks-on-LLM-Inference README citing Apple's
# tech talk 10580).
APPLE_GPU_WORKING_SET = Factor(
    "apple_gpu_working_set_fraction", 0.70, 0.75, 0.78,
    "Metal recommendedMaxWorkingSetSize 70-78 % of unified memory (XiongjieDai README, Apple tech talk 10580)")

# A cloud CPU VM shares its host socket's memory channels with other tenants. Assumption (named, not measured):
# a VM's memory bandwidth scales with its share of one socket's physical cores, bandwidth_vm = bandwidth_socket x
# min(1, (vCPUs / threads_per_core) / socket cores), where the socket's core count comes from the CPU entry ('cores')
# and threads_per_core from the instance (sourced per instance: 1 on AWS M7a, where each vCPU is a physical core;
# 2 on SMT / Hyper-Threading hosts such as AWS M7i, GCP C3D and Azure Dasv5, where two vCPUs share one core). An
# instance without threads_per_core (a user hardware file) is counted as one vCPU per core, which overstates the
# share up to 2x on an SMT host. A VM larger than one socket is capped at one socket's bandwidth (llama.cpp threads
# on a multi-socket VM do not add the second socket's bandwidth without NUMA placement).
VM_BANDWIDTH_SHARE_NAME = "cpu_vm_bandwidth_share"
VM_BANDWIDTH_SHARE_SOURCE = ("assumption: socket bandwidth x min(1, (vCPUs / threads_per_core) / socket cores); "
                             "see docs/hardware.md 'CPU cloud instances'")


def vm_bandwidth_share(vcpus: float, socket_cores: float, threads_per_core: float = 1.0) -> float:
    """The share of one socket's memory bandwidth a VM with ``vcpus`` gets: its physical cores
    (``vcpus / threads_per_core``) over the socket's cores, capped at 1 (see VM_BANDWIDTH_SHARE_SOURCE)."""
    if vcpus <= 0 or socket_cores <= 0 or threads_per_core <= 0:
        raise ValueError("vcpus, socket_cores and threads_per_core must be positive")
    return min(1.0, vcpus / threads_per_core / socket_cores)



# When a serving request gives no speed or latency limit, each user should at least get text as fast as people
# read it: Brysbaert (2019), "How many words do we read per minute? A review and meta-analysis of reading rate",
# Journal of Memory and Language 109:104047 -- 238 words/min for silent reading of non-fiction; at 4/3 tokens per
# English word (OpenAI tokenizer rule of thumb: 1 token ~ 0.75 words) = 238 / 60 x 4 / 3 = 5.29 tokens/s.
READING_RATE_TOKENS_PER_SECOND = 238 / 60 * 4 / 3

ALL = (DECODE_BANDWIDTH_GPU, LLAMACPP_DECODE_BANDWIDTH, LLAMACPP_LAYER_OVERHEAD_GPU, LLAMACPP_DECODE_BANDWIDTH_APPLE,
       LLAMACPP_LAYER_OVERHEAD_APPLE, DECODE_BANDWIDTH_CPU, COMPUTE, TRAINING_HFU, TRAINING_MFU, APPLE_GPU_WORKING_SET)


def decode_bandwidth_factor(device_kind: str, weights_format: str) -> Factor:
    """The bandwidth factor for a device kind (gpu/apple/cpu...) and weight format (see the module constants)."""
    if device_kind == "cpu":
        return DECODE_BANDWIDTH_CPU
    if weights_format.startswith("gguf:"):
        return LLAMACPP_DECODE_BANDWIDTH_APPLE if device_kind == "apple" else LLAMACPP_DECODE_BANDWIDTH
    return DECODE_BANDWIDTH_GPU


def decode_layer_overhead(device_kind: str, weights_format: str) -> Factor | None:
    """The per-layer decode-step overhead (eq. 7) for llama.cpp (GGUF) on a GPU or Apple silicon; None elsewhere
    (CPU threads have no kernel launches; engines with CUDA graphs, e.g. vLLM, are covered by their bandwidth
    factor)."""
    if not weights_format.startswith("gguf:") or device_kind == "cpu":
        return None
    return LLAMACPP_LAYER_OVERHEAD_APPLE if device_kind == "apple" else LLAMACPP_LAYER_OVERHEAD_GPU
