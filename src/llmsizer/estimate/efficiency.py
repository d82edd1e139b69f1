"""Efficiency factors: the share of a device's peak that real kernels reach, as named, cited defaults.

Each is a ``Factor`` (low, expected, high) with the published measurement or tool constant it comes from,
following ``estimate/engines.py``. Calibrated on validation rows (named below, left out of the error summary), each
re-derived by the test named at its comment: the llama.cpp single-sequence decode constants (bandwidth share and
per-layer overhead on GPU and Apple, the unfused-attention work w on GPU and Apple, the SM stream bytes per cycle:
tests/hardware/test_efficiency_calibration.py), the three llama.cpp prefill constants (tests/hardware/test_prefill_calibration.py), the llama.cpp
batched-decode constants (identical-sequence routings: tests/estimate/test_identical_routings.py; the graphs-off time
per layer: test_graphs_off_overhead.py; the flash-attention K/V stream share: test_fattn_stream_share.py), vLLM's V0
engine step time (tests/validation/test_vllm_static_batch.py), vLLM's V1 host step time
(tests/validation/test_vllm_serving.py), the serving engines' decode streaming share and their Hopper stream limit
(vLLM, SGLang: tests/validation/test_serving_share.py) and the training-speed constants (utilisation on Ada, Ampere, Hopper and on a
CPU's AMX units, the flash-attention kernel's share of it, the float8 GEMMs' share, the shared host-path collective
bandwidth, the host seconds per launched kernel: tests/hardware/test_training_calibration.py); every other factor
comes from outside llmsizer's validation rows (tests/validation/), which only measure how far these defaults land.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import DeviceCannotRunError
from ..formulas.sdpa_dispatch import flash_attn_refusal, flex_refusal, sdpa_backend, sdpa_refusal, triton_flash_refusal
from ..formulas.speed import sm_streaming_bandwidth
from ..formulas.training_time import fwd_bwd_speed_ratio
from .ranges import SERVING_ENGINES


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

# The serving engines (vLLM, SGLang) on a GPU: their decode step streams weights + KV at this share of the datasheet
# bandwidth (eq. 1 of formulas/speed.py), in place of DECODE_BANDWIDTH_GPU's 0.8, which left every summarised
# one-sequence serving row slower than predicted (measured / expected 0.785-0.996, so the expected value sat above its
# own calibrated range). CALIBRATED on three named one-sequence rows, one per GPU-release-engine pair, all device-bound
# and none bound by the SMs' stream (SERVING_STREAM_BYTES_PER_SM_CYCLE below: the A100 and A10G have no figure; no host
# term: vLLM 0.18-0.23's overlapped 2.39 ms and SGLang's unestablished one are below their device steps): VS06
# (vLLM 0.23.0, Llama-3.1-8B, A100 SXM 40GB) 0.731, VS13 (vLLM 0.18.0, Llama-3.1-8B, A10G) 0.702 and SS06 (SGLang 0.5,
# Llama-3.1-8B, A10G) 0.759 -- each the row's streamed bytes per step over the datasheet bandwidth x its measured time
# per token; the constant is their geometric mean (the share that leaves the three log errors summing to zero); low /
# high are the lowest and highest of the three. Re-derived by tests/validation/test_serving_share.py; the rows are left
# out of the error summary and the bands, every other serving row (the A10G table's other models, QV02-QV22 on A100
# 80GB, the H100 and H20 rows, the V0 static batches) is held out. Until session 11 a fourth row, VS17 (vLLM 0.11.0,
# Qwen3-8B, H100 SXM, 0.628), was in the mean (0.703); it now fixes the Hopper stream limit below, which binds it. Not
# explained by the memory type (tests/validation/test_engine_speed_rows.py
# test_memory_type_does_not_separate_the_serving_rows), so one share for every GPU.
SERVING_DECODE_BANDWIDTH = Factor(
    "serving_engine_decode_bandwidth_efficiency", 0.702, 0.730, 0.759,
    "calibrated: one-sequence serving rows VS06 (vLLM 0.23 A100 40GB), VS13 (vLLM 0.18 A10G), SS06 (SGLang 0.5 "
    "A10G): geometric mean of streamed bytes / (datasheet bandwidth x measured step)")
# The bytes an SM streams per cycle in the serving engines' decode products (beta of formulas/speed.py eq. 12, B_step =
# min(e_m B, N_SM f beta)), per NVIDIA architecture, for the releases whose rows show it (estimate/engines.py
# STREAM_LIMITED: vLLM 0.8-0.13, SGLang < 0.5): the engines multiply bf16 weights by one token through PyTorch's
# F.linear (the cuBLAS / cuBLASLt kernels of the release's PyTorch, picked per architecture), whose loads in flight per
# SM over the memory latency in SM cycles bound the stream where the SMs are few or slow for the memory (Little's law).
# Hopper: CALIBRATED on one named row, VS17 (vLLM 0.11.0, Qwen3-8B, one H100 SXM, one sequence, 7.22 ms per token;
# gpustack performance-lab h100-latency.md @47277d7): the row's streamed bytes per step over its measured step over 132
# SMs x 1.98 GHz (the FP32 peak's clock) = 8.05 -- already a calibration row (of the share above until session 11), so
# no held-out row is spent. Held out: SGLang 0.4.6.post1 on the H20 (another engine, release, GPU and source; 78 SMs at
# 2.2 GHz against 4.0 TB/s: 1.38 TB/s, 0.35 of the datasheet), whose 8B-to-32B rows stream 1.36 TB/s once per-step
# constants cancel (tests/validation/test_serving_share.py; +111 to +125 % fast at the DRAM share before), and vLLM
# 0.11's batched H100 rows VS18-VS20. Not applied to later releases, whose rows stream faster through the same SMs:
# vLLM 0.21 on the H100 (VS01, 8.9 B per SM-cycle), SGLang 0.5.3 on the H100 (SS09, about 8.8) and SGLang 0.5.13 on
# the H20 (tileRL's 27B row: >= 13.2; docs/hardware.md). Ampere has no figure: the A100 80GB rows of vLLM 0.6.3
# (QV13-QV22) stream above 9.3 B per SM-cycle of its 108 SMs at 1.41 GHz, so its DRAM share binds first; other
# architectures have no row. One row, no spread claimed.
SERVING_STREAM_BYTES_PER_SM_CYCLE: dict[str, Factor] = {
    "hopper": Factor(
        "serving_stream_bytes_per_sm_cycle_hopper", 8.05, 8.05, 8.05,
        "calibrated: vLLM 0.11.0 Qwen3-8B 1 x H100 SXM one sequence, 7.22 ms per token (VS17, gpustack "
        "performance-lab @47277d7); formulas/speed.py eq. (12)"),
}

# llama.cpp decode on a GPU or Apple silicon, eq. (7) of formulas/speed.py: t = bytes / (B x eta) + L x tau, with the
# single-token attention of builds without flash attention as eq. (13) (LLAMACPP_UNFUSED_ATTENTION_WORK_* below).
# CALIBRATED on the named llama-bench rows marked 'calibration' in validation/llamacpp_bench.csv (XiongjieDai/GPU-
# Benchmarks-on-LLM-Inference README @00dd2bd, May 2024 build, -fa 0), Llama-3-8B Q4_K_M and F16 generating 512 to
# 8192 tokens: first w of eq. (13) from how each series' step grows from tg512 to tg1024/4096/8192 (eta and tau cancel),
# then least squares of eq. (7) over the tg512 rows with w F_attn / R_p taken off. NVIDIA: RTX 3090 and RTX 4090
# (XD01-XD05, XD33, XD34, XD70-XD79) -> eta 0.923, tau 88.5 us per layer (each GPU's tg512 rows alone: eta 0.893 /
# 0.975, tau 92.3 / 90.0 us); Apple (Metal): M2 Ultra (XD12, XD14, XD124-XD129) -> eta 0.901, tau 184.5 us. Before eq.
# (13) the same form on the tg512 rows alone gave eta 0.923, tau 91.3 us (Apple 0.901, 195 us), the cache read at the
# bandwidth. The calibration rows are left out of the error summary; the other rows (DGX Spark, H100-PCIe, RTX A6000,
# LLaMA-2 rows, every other GPU's and chip's depth rows, M1/M3, llama.cpp discussion #4167) are held out. Re-derived
# from the rows by tests/hardware/test_efficiency_calibration.py. Replaces a flat 0.55 x bandwidth (llmfit), which had
# no per-layer term and so erred by -30 % on 4B-8B models on DGX Spark and +117 % on H100-PCIe Q4_0.
LLAMACPP_DECODE_BANDWIDTH = Factor(
    "llamacpp_decode_bandwidth_efficiency", 0.893, 0.923, 0.975,
    "calibrated: llama-bench Llama-3-8B Q4_K_M/F16 tg512-8192 on RTX 3090 + RTX 4090 (XiongjieDai README @00dd2bd), "
    "with formulas/speed.py eq. (13)")
# Ranges: the envelope of the joint fit and each GPU's own tg512 fit (a longer overhead is the slow end). Apple has one
# calibration device, so no spread is claimed (low = expected = high).
LLAMACPP_LAYER_OVERHEAD_GPU = Factor(
    "llamacpp_decode_overhead_per_layer_gpu", 92.3e-6, 88.5e-6, 88.5e-6,
    "calibrated with llamacpp_decode_bandwidth_efficiency (same sixteen rows); seconds per layer per step")
LLAMACPP_DECODE_BANDWIDTH_APPLE = Factor(
    "llamacpp_decode_bandwidth_efficiency_apple", 0.901, 0.901, 0.901,
    "calibrated: llama-bench Llama-3-8B Q4_K_M/F16 tg512-8192 on M2 Ultra (XiongjieDai README @00dd2bd), with "
    "formulas/speed.py eq. (13)")
LLAMACPP_LAYER_OVERHEAD_APPLE = Factor(
    "llamacpp_decode_overhead_per_layer_apple", 184.5e-6, 184.5e-6, 184.5e-6,
    "calibrated with llamacpp_decode_bandwidth_efficiency_apple (same eight rows); seconds per layer per step")
# The bytes an SM of an NVIDIA GPU streams per cycle in llama.cpp's decode mat-vec kernels (beta of formulas/speed.py
# eq. 12: B_step = min(e_m B, N_SM f beta)). CALIBRATED on one named row: llama-bench Llama-3-8B F16 tg512 on A100 SXM
# 80GB, 53.49 tokens/s (validation/llamacpp_bench.csv XD44; XiongjieDai README @eafac9d, the May 2024 professional-GPU
# table): the row's weight bytes (15.01 GB) over its step less the per-layer overhead and the single-token attention of
# eq. (13) (1 / 53.49 s - 32 x 88.5 us - 85 us = 15.78 ms) = 951 GB/s, 47 % of the 2039 GB/s datasheet figure, over
# 108 SMs x 1.41 GHz (the FP32 peak's clock) = 6.24 B per SM-cycle (6.26 before eq. 13);
# re-derived by tests/hardware/test_efficiency_calibration.py. Held out: every other row of that table (A100 PCIe 80GB,
# H100 PCIe, A100 SXM Q4_K_M, and the GDDR cards it must leave alone: L40S, RTX A6000, RTX 6000 Ada) and the December
# 2023 H100-PCIe rows XD24/XD26. Before it, the HBM rows were +26 % (H100 PCIe Q4_K_M) to +71 % (A100 SXM F16) fast.
LLAMACPP_STREAM_BYTES_PER_SM_CYCLE = Factor(
    "llamacpp_stream_bytes_per_sm_cycle", 6.24, 6.24, 6.24,
    "calibrated: llama-bench Llama-3-8B F16 tg512 on A100 SXM 80GB (XiongjieDai README @eafac9d, row XD44); "
    "formulas/speed.py eq. (12)")

# Attention of a single-token decode step without flash attention (formulas/speed.py eq. 13: the KQ and KQV products
# over the F16 cache cost w x their FLOPs at the kernel path's peak, the cache read inside them). CALIBRATED with the
# decode constants above (same rows, same derivation: w from each series' growth from tg512 to tg1024/4096/8192,
# least squares through the origin): NVIDIA (ggml-cuda batched cuBLAS, CUBLAS_COMPUTE_16F: the FP16-accumulate tensor
# rate) on RTX 3090 + RTX 4090 (each alone: 187.7 / 235.6); Apple (ggml-metal kernel_mul_mv_f16_f32_l4, one simdgroup
# per cell and head: the FP16 shader rate) on M2 Ultra. Held out: the depth rows of every other GPU and chip (RTX A6000,
# RTX 6000 Ada, L40S, A100 PCIe/SXM, H100 PCIe, M1 Max, M3 Max, M1) and the December 2023 rows. Re-derived by
# tests/hardware/test_efficiency_calibration.py. Before eq. (13) the held-out GPUs at tg8192 were +2 .. +29 % fast (the
# step's growth with depth under-predicted 2.1-4.8x) and M1 Max +38 .. +84 %.
LLAMACPP_UNFUSED_ATTENTION_WORK_GPU = Factor(
    "llamacpp_unfused_attention_work_cuda", 195.2, 195.2, 195.2,
    "calibrated: llama-bench Llama-3-8B Q4_K_M/F16 tg512-8192 on RTX 3090 + RTX 4090, -fa 0 (XiongjieDai README "
    "@00dd2bd); FLOPs' worth of FP16-accumulate tensor work per FLOP of a one-column batched cuBLAS product "
    "(ggml-cuda.cu ggml_cuda_mul_mat_batched_cublas); formulas/speed.py eq. (13)")
LLAMACPP_UNFUSED_ATTENTION_WORK_APPLE = Factor(
    "llamacpp_unfused_attention_work_metal", 76.6, 76.6, 76.6,
    "calibrated: llama-bench Llama-3-8B Q4_K_M/F16 tg512-8192 on M2 Ultra, -fa 0 (XiongjieDai README @00dd2bd); "
    "FLOPs' worth of FP16 shader work per FLOP of the one-token mat-vec products (ggml-metal "
    "kernel_mul_mv_f16_f32_l4); formulas/speed.py eq. (13)")


# Memory-bound kernels of a training step (norms, rotary, activations, residual adds, the loss: formulas/
# elementwise_traffic.py eq. E7) stream their tensors at the same empirical share of the datasheet bandwidth that
# AIConfigurator applies to every memory-bound op (mem_bw_empirical_scaling_factor 0.8, the source of
# DECODE_BANDWIDTH_GPU): one sourced figure, not fitted here.
MEMORY_BOUND_BANDWIDTH = Factor(
    "memory_bound_kernel_bandwidth_efficiency", DECODE_BANDWIDTH_GPU.low, DECODE_BANDWIDTH_GPU.expected,
    DECODE_BANDWIDTH_GPU.high, DECODE_BANDWIDTH_GPU.source)

# CPU decode: a llama.cpp user measured about 35 GB/s on dual-channel DDR5-4800 (76.8 GB/s theoretical),
# 35 / 76.8 = 0.46 (ai-radar.it, 'ottimizzare modelli MoE su CPU').
DECODE_BANDWIDTH_CPU = Factor(
    "decode_bandwidth_efficiency_cpu", 0.35, 0.46, 0.65,
    "ai-radar.it: ~35 GB/s of 76.8 GB/s in llama.cpp on desktop DDR5 (35 / 76.8 = 0.46)")

# The memory-bound kernels of a training step on a CPU (the same eq. E7 bytes, and the optimizer step) stream host
# RAM at the share a CPU reaches of its datasheet bandwidth: DECODE_BANDWIDTH_CPU, the one sourced CPU figure (not
# fitted here); a VM's bandwidth is its share of the socket (cpu_vm_bandwidth_share below).
MEMORY_BOUND_BANDWIDTH_CPU = Factor(
    "memory_bound_kernel_bandwidth_efficiency_cpu", DECODE_BANDWIDTH_CPU.low, DECODE_BANDWIDTH_CPU.expected,
    DECODE_BANDWIDTH_CPU.high, DECODE_BANDWIDTH_CPU.source)


# An Apple chip's GPU (PyTorch's MPS backend): the memory-bound kernels of a training step (eq. E7's bytes, the
# optimizer step) stream the unified memory at the share its one sourced streaming figure reaches, the Metal decode
# kernels' LLAMACPP_DECODE_BANDWIDTH_APPLE (M2 Ultra rows), as the GPU's MEMORY_BOUND_BANDWIDTH takes the CUDA decode
# share; no measured MPS elementwise-kernel bandwidth in hand, so a stand-in, named in the assumption.
MEMORY_BOUND_BANDWIDTH_APPLE = Factor(
    "memory_bound_kernel_bandwidth_efficiency_apple", LLAMACPP_DECODE_BANDWIDTH_APPLE.low,
    LLAMACPP_DECODE_BANDWIDTH_APPLE.expected, LLAMACPP_DECODE_BANDWIDTH_APPLE.high,
    "stand-in: the share of the unified memory bandwidth Metal kernels stream on an Apple GPU, "
    + LLAMACPP_DECODE_BANDWIDTH_APPLE.source)


def memory_bound_bandwidth(device_kind: str) -> Factor:
    """The share of the datasheet memory bandwidth a training step's memory-bound kernels reach on a device kind."""
    if device_kind == "apple":
        return MEMORY_BOUND_BANDWIDTH_APPLE
    return MEMORY_BOUND_BANDWIDTH_CPU if device_kind == "cpu" else MEMORY_BOUND_BANDWIDTH


# Prefill and batched decode are matrix-matrix products. PyTorch's RuntimeEstimator cost model divides FLOPs
# by 0.75 x peak (torch/distributed/_tools/runtime_estimator.py, operator-level-cost-model); gpu_poor uses 0.85.
COMPUTE = Factor(
    "compute_efficiency", 0.50, 0.75, 0.85,
    "PyTorch RuntimeEstimator operator-level-cost-model: flops / (0.75 x peak); gpu_poor 0.85")

# llama.cpp prefill on NVIDIA GPUs: the kernel each matrix product takes, read from ggml-cuda (ggml-org/llama.cpp
# @027ef87). ggml/src/ggml-cuda/mmq.cu ggml_cuda_should_use_mmq: the quantized types (Q4_0 .. Q8_0, MXFP4, the
# K-quants Q2_K .. Q6_K, the IQ types) take MMQ -- int8 tensor-core MMA on the weights as stored, activations
# quantized to q8_1 -- whenever `turing_mma_available(cc)` (Turing and later), at every batch size and for MoE
# (mul_mat_id) too; F16/BF16/F32 weights go to cuBLAS (ggml-cuda.cu ggml_cuda_op_mul_mat_cublas: cublasGemmEx
# with CUBLAS_COMPUTE_16F on NVIDIA, i.e. FP16 accumulation, the GeForce rate that is 2x the FP32-accumulate one).
# Attention (flash-attention or KQ/KQV batched GEMMs) runs on FP16 tensor cores like the cuBLAS path. So each
# path's time is eq. (9) of formulas/speed.py at that path's peak: int8 TOP/s for MMQ, the FP16-accumulate rate
# for cuBLAS; a routed-expert product (MMQ mul_mat_id) runs the 128-column tiles its expert's columns fill, each a
# full tile's work (formulas/speed.py eq. 9''', LLAMACPP_MMQ_ID below; until #12 round 3 the saturating form
# e n / (n + n_h) with n_h = 357 columns; dense products run at ubatch >= 512 columns and take e itself; a
# column-dependence there is contradicted by DGX Spark, whose dense rows at 2048 columns reach the same 13-18 %
# of the int8 rate as the RTX 4090 at 512). CALIBRATED (tests/hardware/test_prefill_calibration.py re-derives all
# three): cuBLAS on llama-bench Llama-3-8B F16 pp512 on RTX 4090 (XiongjieDai README @00dd2bd, row XD06; solved
# exactly); MMQ only on rows whose build ran MMQ, the DGX Spark tables (build 6918), with each dense product's
# weights read once per 128-column tile (formulas/speed.py eq. 9''; mmq.cuh): e_id (LLAMACPP_MMQ_ID) so that
# Qwen3-Coder-30B-A3B Q8_0 pp2048 (MoE: 128 tokens per expert, row PM0096) is met exactly, e the geometric mean of the efficiencies that meet
# the two dense rows, Qwen2.5-7B Q8_0 (PM0098, 0.241) and Gemma-3-4B Q4_0 (PM0101, 0.224), each then within 4 %.
# These four are calibration rows in the report; the other prefill rows are held out. The RTX 4090 row ran without
# flash attention (llama-bench -fa 0, its default then), so its materialised KQ scores (LLAMACPP_KQ_BYTES_PER_SCORE)
# are part of the solve. The May 2024 Q4_K_M row of the same table (XD04) fed the MMQ efficiency until #12 round 2
# found that its build never ran MMQ above 32 columns (DEQUANT_CUBLAS_PATH below); it is now held out (-3.2 %).
# Result: MMQ 23.2 % of the int8 rate (15.7 % from XD04 without the tile reads; 13.5 % from the DGX Spark rows
# without them, +-11 %), cuBLAS 41.8 % of the FP16-accumulate rate, e_id 14.4 % on executed expert tiles. Checked on GeForce
# MMQ rows outside the validation set (llama.cpp PR #7676: RTX 4090 Llama 3 8B Q4_0 pp512, 10358.75 t/s; PR #7860:
# RTX 3090 Q6_K pp2048, 3491.20): -25 % and -2 % (-40 % and -27 % without the tile reads; -31 % / -16 % with 0.157).
# Replaces one 0.75 x the BF16 peak for every path: held-out NVIDIA prefill rows 75.9 % -> 10.9 % median |error| at
# the first fit.
# Low = expected = high: one calibration set, no spread claimed (the calibrated ranges of estimate/ranges.py
# carry the spread).
LLAMACPP_MMQ = Factor(
    "llamacpp_prefill_mmq_efficiency", 0.2323, 0.2323, 0.2323,
    "calibrated: llama-bench pp2048 on DGX Spark, build 6918: Qwen2.5-7B Q8_0 + Gemma-3-4B Q4_0 (dense, weights read "
    "once per 128-column tile, formulas/speed.py eq. 9'') with Qwen3-30B-A3B Q8_0 (MoE); "
    "share of the int8 tensor peak (ggml-cuda mmq.cu ggml_cuda_should_use_mmq)")
# One share for every NVIDIA architecture: ggml-cuda runs one MMQ kernel configuration on all of them (read for #12).
# ggml-org/llama.cpp @0c1e57098 (vendored in llama-cpp-python 0.3.36) ggml/src/ggml-cuda/mmq.cuh
# ggml_cuda_mmq_get_config L249-258 sends every compute capability >= Volta to mmq-config-ampere.cuh, whose 353 cases
# are all 256 threads, occupancy 1 (mul_mat_q __launch_bounds__, L962), 128-row tiles, 8..128 columns, stream-k;
# mmq-config-blackwell.cuh (L1-37) differs only for MXFP4/NVFP4 weights with Q4 activations (native FP4); the stream-k
# launch is one block per SM unless the tiles fill >= 90 % of a whole wave (mmq.cuh L1447-1452). The older layout
# (@00cd2085 get_mmq_x_max_host, get_mmq_y_host, mmq_get_nwarps_host) is likewise 128 x 128, 8 warps, NVIDIA >= 7.5.
# So the kernel gives no per-architecture share. Measured against it (useful dense-product int8 work per second over
# the catalog peak, from this model's own split of the time): the held-out discrete-GPU rows (llama.cpp b11447, pp512)
# reach 0.21 on L40S (PX15/17/28: 430 int8 ops per SM per clock at 2.52 GHz) and 0.39-0.48 on A10G (PX01, PX31-35,
# PW03: 404-492 per SM-clock at 1.71 GHz), the same per-SM rate at twice the share of the A10G's derived INT8 peak
# (1,024 per SM-clock, catalog a10g flops.int8, confidence low); the DGX Spark calibration rows (build 6918, pp2048,
# 16 tile passes at 273 GB/s) reach 0.12-0.15 (275-340 per SM-clock at the measured 2.25 GHz). Not fitted apart: no
# mechanism for the GB10 / discrete-GPU split was found in the kernel source, and none is tuned to those rows.
# The per-column MMQ rate of a batched decode step (formulas/speed.py eq. 10: the products' columns beyond the first,
# b <= 32 columns, one column tile, so no tile re-reads of eq. 9''): the MMQ share the same two dense DGX Spark rows
# give when every second of their products is counted as arithmetic (no tile-read term; LLAMACPP_MMQ_TILE_COLUMNS = 0
# in tests/hardware/test_prefill_calibration.py): geometric mean of 0.121 (PM0098) and 0.150 (PM0101). Eq. (10)'s
# rows were validated at this rate (its constants LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU and the routings of eq. 11 are
# fitted with it); at LLAMACPP_MMQ's 0.2323 the held-out dense batched rows at b >= 4 go from 3.5 % to 4.9 % median
# |error| (worst 14 %): a narrow tile's arithmetic is slower per FLOP than a 128-column one's, not modelled apart.
LLAMACPP_MMQ_STEP = Factor(
    "llamacpp_batched_step_mmq_efficiency", 0.1349, 0.1349, 0.1349,
    "calibrated: llama-bench pp2048 on DGX Spark, build 6918, Qwen2.5-7B Q8_0 + Gemma-3-4B Q4_0, all time counted as "
    "MMQ arithmetic; the rate of formulas/speed.py eq. (10)'s narrow products")
LLAMACPP_CUBLAS = Factor(
    "llamacpp_prefill_cublas_efficiency", 0.418, 0.418, 0.418,
    "calibrated: llama-bench Llama-3-8B F16 pp512 on RTX 4090; share of the FP16-accumulate tensor peak "
    "(ggml-cuda.cu cublasGemmEx CUBLAS_COMPUTE_16F)")
# The routed-expert products (MMQ mul_mat_id) on executed tile columns: formulas/speed.py eq. (9''') counts the tiles
# mmq.cu/mmq.cuh run per expert (128-column tiles sized by the ubatch's token count, ceil(m_e / 128) per expert, each
# partly filled tile a full tile's MMA work, each reading its expert's weights); e_id is the share of the int8 rate those
# executed columns reach. CALIBRATED on one named row, Qwen3-Coder-30B-A3B Q8_0 pp2048 on DGX Spark (PM0096, build
# 6918; 128 experts, 8 per token: 128 columns per expert per 2048-token ubatch, 1.48 tiles), with LLAMACPP_MMQ fixed
# by the dense rows first; re-derived by tests/hardware/test_prefill_calibration.py. Held out: gpt-oss-120b (PM0093,
# 64 columns per expert: one half-filled tile) and gpt-oss-20b (PM0090, 256 columns: 2.48 tiles). It replaces the
# saturating form of eq. (9) with n_h = 357 columns at half efficiency, fitted on the same row, which put PM0093 at
# -42 % and PM0090 at +8 %. e_id below the dense products' e: the mul_mat_id launch also gathers and quantizes each
# expert's activations (mmq.cu ggml_cuda_launch_mm_ids_helper, quantize_mmq_q8_1_cuda with ids) and writes its rows
# scattered (ids_dst), none of which eq. (9''') counts. One row, no spread claimed. The int8 rate is the one that
# applies to gpt-oss's MXFP4 experts in that build too: mmq.cuh load_tiles_mxfp4 (@da232870 L699-760) expands the
# e2m1 values to int8 through kvalues_mxfp4 into the Q8_1 MMA tile; native FP4 MMA on Blackwell came later (ggml-org/ggml
# @f1f97081, 2025-12-24, llama.cpp PR #17906).
LLAMACPP_MMQ_ID = Factor(
    "llamacpp_prefill_mmq_id_efficiency", 0.1443, 0.1443, 0.1443,
    "calibrated: llama-bench Qwen3-Coder-30B-A3B Q8_0 pp2048 on DGX Spark, build 6918 (PM0096); share of the int8 "
    "tensor peak on the executed expert tile columns of formulas/speed.py eq. (9''') (ggml-cuda mmq.cu mul_mat_id)")
# Hopper: llama.cpp's CUDA matrix kernels issue warp-level tensor instructions: ggml/src/ggml-cuda/mma.cuh (@032f69d;
# L1-4: "primitives that expose the tensor core PTX instructions", the PTX "mma instruction") wraps every NVIDIA
# product of MMQ, the MMF path and flash attention in asm("mma.sync.aligned.m16n8k16/k32 ..."); ggml-cuda has no
# wgmma, the warpgroup instruction of sm_90a. A Hopper SM gives its dense tensor rate, 4096 FP16 FLOP per SM-clock
# (H100 SXM 989.4 TFLOP/s = 132 SMs x 1.83 GHz x 4096: NVIDIA/cudnn-frontend PR #650 _FLOPS_PER_CLOCK_PER_SM), only
# through wgmma (Luo et al. 2024, "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture", arXiv 2402.13499:
# wgmma is needed to unlock the fourth-generation tensor core); the synchronous warp-level instructions issue at the
# Ampere rate per SM-clock, 2048 (A100 312 TFLOP/s = 108 SMs x 1.41 GHz x 2048). So llama.cpp's own kernels on Hopper
# see 2048 / 4096 = 0.5 of the catalog's dense peak. NOT FITTED: the ratio of two published per-SM rates (re-derived
# by tests/hardware/test_hopper_sync_mma.py). The cuBLAS path (cublasGemmEx, CUBLAS_COMPUTE_16F) is closed source;
# that the same share holds there is read from measurements, not code, and is a named assumption: the held-out May
# 2024 llama-bench rows of XiongjieDai's professional-GPU table (@eafac9d, XD68/XD69) ran cuBLAS for both F16 and
# Q4_K_M (builds of that time printed CUDA_USE_TENSOR_CORES: yes and ran quantized products of more than 32 columns
# as dequantize + FP16 cuBLAS on Volta and later, llama.cpp PR #3412; int8 tensor cores reached MMQ in June 2024,
# PRs #7676/#7860), and put H100 PCIe over A100 PCIe at 1.36x (Q4_K_M) and 1.40x (F16) in pp512: the ratio of their
# SM count x clock (1.31), not of their datasheet tensor peaks (2.42x). Before it both rows were +97 .. +100 %.
LLAMACPP_SYNC_MMA_SHARE = {
    "hopper": Factor(
        "llamacpp_sync_mma_share_hopper", 0.5, 0.5, 0.5,
        "ggml-cuda mma.cuh issues mma.sync (no wgmma): 2048 of Hopper's 4096 dense FP16 FLOP per SM-clock "
        "(A100 312 TFLOP/s = 108 x 1.41 GHz x 2048; H100 989.4 = 132 x 1.83 GHz x 4096, cudnn-frontend PR #650; "
        "Luo et al. 2024 arXiv 2402.13499)"),
}


def sync_mma_share(architecture: str) -> Factor | None:
    """The share of the catalog's dense tensor peak that a kernel issuing warp-level mma.sync (and no wgmma) can
    reach on a GPU architecture (LLAMACPP_SYNC_MMA_SHARE: a ratio of per-SM rates, whoever issues the instruction);
    None where such a kernel reaches the whole peak (Volta .. Ada; GeForce / RTX PRO Blackwell, compute capability
    12.x, where mma.sync is the tensor path there is, CUTLASS's "Blackwell SM120 GEMMs"). Not established: datacenter
    Blackwell (10.x: B200, B300, GB200), whose dense peak is tcgen05's; no published per-SM mma.sync rate was found
    for it, so it gets no cap (an open gap, not a measured 1.0)."""
    return LLAMACPP_SYNC_MMA_SHARE.get(architecture)


def llamacpp_sync_mma_share(architecture: str) -> Factor | None:
    """The share of the catalog's dense tensor peak that llama.cpp's warp-level mma.sync kernels can issue on a GPU
    architecture: sync_mma_share (ggml-cuda has no wgmma)."""
    return sync_mma_share(architecture)


# Routings whose experts a llama.cpp batched step of b >= 2 sequences fed identical tokens (llama-batched-bench)
# reads, eq. (11) of formulas/speed.py: r = c b^alpha. FITTED (least squares of log r on log b) on the routings that make eq. (10) match each
# named row: gpt-oss-120b MXFP4 on DGX Spark at b >= 4, BB16-BB18, BB20-BB23, BB25-BB28
# (validation/llamacpp_batched_bench.csv) and PM0104 (public_measurements.csv): 12 calibration rows, out of the
# summary; the Qwen3-30B-A3B and gpt-oss-20b rows and every b = 2 row are held out. Re-derived by
# tests/estimate/test_identical_routings.py. Fitted with the graphs-off time of LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU in
# eq. (10) (1.98 b^0.56 before it), the sliding-layer cells of the flash-attention mask scan
# (engines.LLAMACPP_FA_KV_TILE; 1.73 b^0.59 before it), the flash-attention K/V stream share
# LLAMACPP_FA_STREAM_SHARE (1.69 b^0.60 before it), the per-layer overhead re-derived with eq. (13) (88.5 us; 1.79
# b^0.55 with 91.3 us) and the K/V views padded to 256 cells with the share applied at b = 1 too (1.80 b^0.55
# before it; 1.82 b^0.54 with the MMQ rate of the first prefill fit, LLAMACPP_MMQ 0.157).
LLAMACPP_IDENTICAL_ROUTINGS_SCALE = Factor(
    "llamacpp_identical_routings_scale", 1.84, 1.84, 1.84,
    "fitted: gpt-oss-120b llama-batched-bench rows at b >= 4 on DGX Spark (BB16-18, BB20-23, BB25-28, PM0104); "
    "formulas/speed.py eq. (11)")
LLAMACPP_IDENTICAL_ROUTINGS_EXPONENT = Factor(
    "llamacpp_identical_routings_exponent", 0.53, 0.53, 0.53,
    "fitted with llamacpp_identical_routings_scale (same rows); formulas/speed.py eq. (11)")
# A llama.cpp CUDA step of b >= 2 sequences runs without CUDA graphs and without the single-column fusions:
# ggml-cuda.cu check_node_graph_compatibility disables graph capture for any GGML_OP_ADD whose src1 has ne[1] > 1
# ("disable CUDA graphs for batch size > 1 for now") and for MUL_MAT_ID with ne[2] != 1, and
# ggml_cuda_should_fuse_mul_mat_vec_q fuses the gate/up products with the GLU "only for ncols_dst = 1" (ggml-org/ggml
# src/ggml-cuda/ggml-cuda.cu @da232870, the 2025-11-04 sync of llama.cpp's ggml/src/ggml-cuda/ggml-cuda.cu, lines
# 2139-2172 and 2862-2878; build 6918 of the DGX Spark rows is 2f68ce7cf of that week). Each layer's kernels are then
# launched one by one from the host and the fused ones run unfused: a time per layer per step that the b = 1 step of
# eq. (7) does not pay (its L tau is calibrated on graph-replayed steps or, for the 2024 rows, on the same kernels).
# CALIBRATED on named rows: the six dense b = 2 rows of the DGX Spark tables (llama-batched-bench, build 6918:
# Qwen2.5-Coder-7B Q8_0 BB44/BB48/BB53, Gemma-3-4B Q4_0 BB58/BB63/BB67); per row, the measured step increment from
# b = 1 (BB81-BB86, the same prompt; their own errors do not depend on this constant) to b = 2 beyond eq. (10)'s
# increment, over the layers; the median of the six. Held out: every dense row at b >= 4 and every MoE row;
# re-derived by tests/estimate/test_graphs_off_overhead.py. The MoE routings of eq. (11) are re-fitted with it.
# The b = 1 base streams its K/V cells at LLAMACPP_FA_STREAM_SHARE too, over views padded to 256 cells (the
# flash-attention kernels read llama.cpp's padded n_kv; formulas/flash_attention.py), so the constant is solved after
# the share (order: share -> this -> the routings of eq. 11). Range: the six rows imply 65-95 us (high = 95 us; 70 us
# expected and 96 us high with the MMQ rate of the first prefill fit, LLAMACPP_MMQ 0.157; 70 and 81 us before the padding and the b = 1 share, 90 and 103 us before the K/V cells were streamed
# at LLAMACPP_FA_STREAM_SHARE, 79 and 93 us before the sliding layers' cells followed the flash-attention mask scan,
# engines.LLAMACPP_FA_KV_TILE); graphs alone, measured on x86 hosts with the April 2024 build (no
# fusions then), are worth less: LLaMA 2 7B Q4_0 tg 116.31 -> 128.27 tokens/s on RTX 3090 and 138.31 -> 146.81 on
# RTX 4090 (llama.cpp PR #6766, 2024-04-19: 25 and 13 us per layer), H100-PCIe Q4_K_M 143.35 -> 163.83 (issue #6763:
# 27 us per layer); low = 13 us. All calibration rows are DGX Spark's (a Grace Arm host): on x86 hosts the expected
# value may overstate a batched step by up to L x 57 us.
LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU = Factor(
    "llamacpp_graphs_off_overhead_per_layer", 13e-6, 68e-6, 95e-6,
    "calibrated: llama-batched-bench b = 2 vs b = 1 steps of Qwen2.5-Coder-7B Q8_0 and Gemma-3-4B Q4_0 on DGX Spark "
    "(BB44/48/53, BB58/63/67; build 6918); seconds per layer per step without CUDA graphs (ggml-cuda.cu "
    "check_node_graph_compatibility)")
# The share of the mat-vec weight stream's rate (the calibrated decode bandwidth factor) that llama.cpp's CUDA
# flash-attention kernels reach while they stream a decode step's K/V cells (formulas/flash_attention.py eq. F1;
# the kernel a step runs is fattn.cu's choice, formulas/flash_attention.py fattn_kernel). FITTED on the growth of the
# step with the prompt depth at a fixed number of sequences, where weights, routings and every per-step constant
# cancel and only the K/V stream changes: per model, the least-squares slope of the measured step time on eq. F1's
# K/V seconds at share 1 over the prompts 512/4096/8192, one slope for both models (a common slope with an intercept
# per model); share = 1 / slope. Rows: the six dense b = 2 rows of DGX Spark (BB44/BB48/BB53 Qwen2.5-Coder-7B Q8_0,
# vector kernel; BB58/BB63/BB67 Gemma-3-4B Q4_0, mma kernel), already the calibration rows of
# LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU (which does not enter the slope), so no held-out row is spent. Re-derived by
# tests/estimate/test_fattn_stream_share.py. The cells are the kernels' padded views (256-cell n_kv; 0.76 before the
# views were padded: Gemma's b = 2 rows after 512 tokens read 768 cells of each sliding ring, not 528). Range: the two
# models' own slopes (Gemma-3-4B 0.71 mma, Qwen2.5-7B 0.76 vector). Applied to every step a flash-attention kernel
# runs, one sequence included (eq. 7 + F1, eq. 10 + F1): the one-sequence step runs the same kernels with the same
# per-cell work (the vector kernel for Qwen2.5 at every b; fattn-vec.cuh, see docs/hardware.md), and the held-out
# one-sequence depth series agree (Qwen2.5-7B 0.75 from 1 to 32768 tokens, gpt-oss 0.71; the same test checks them).
# Every calibration and held-out row is DGX Spark's (LPDDR5X, 48 SMs): on GDDR and HBM GPUs the kernels' share is
# assumed the same.
LLAMACPP_FA_STREAM_SHARE = Factor(
    "llamacpp_fa_stream_share", 0.71, 0.74, 0.76,
    "fitted: llama-batched-bench b = 2 steps of Qwen2.5-Coder-7B Q8_0 and Gemma-3-4B Q4_0 on DGX Spark over prompts "
    "512/4096/8192 (BB44/48/53, BB58/63/67; build 6918): the step's growth with depth over eq. F1's K/V seconds; "
    "no published row of another GPU checks it")
# Without flash attention llama.cpp writes the KQ scores as F32 (ggml_mul_mat_set_prec(kq, GGML_PREC_F32)), the
# softmax reads and writes them, the KQV product reads them: 4 passes x 4 bytes per score (src/llama-graph.cpp
# build_attn_mha).
LLAMACPP_KQ_BYTES_PER_SCORE = 16
MMQ_PATH, CUBLAS_PATH, DEQUANT_CUBLAS_PATH = "mmq", "cublas", "dequantize+cublas"
# Decoding several sequences at once (formulas/speed.py eq. 10) uses the same path's rate for the products' columns
# beyond the first: up to MMVQ_MAX_BATCH_SIZE = 8 columns ggml-cuda runs mmvq (the same weights per column), above it
# MMQ/cuBLAS; no constant of its own (the per-column time measured on DGX Spark matches this rate, eq. 10).
_CUBLAS_GGUF = ("gguf:f16", "gguf:bf16", "gguf:f32")


# Which path a quantized prefill product takes depends on the build. Builds before the June 2024 switch ran every
# quantized product of more than MMQ_MAX_BATCH_SIZE = 32 columns on Volta and later (fp16_performance_good) through
# cuBLAS: ggml-cuda.cu ggml_cuda_mul_mat, "when tensor cores are available, use them for large batch size"
# (ggml-org/ggml src/ggml-cuda.cu @8c44bc9, the 2024-05-14 sync of llama.cpp's file, L1903-1926, and unchanged at
# @a59a24f9, the 2024-06-15 sync, L1909-1932; MMQ_MAX_BATCH_SIZE in src/ggml-cuda/common.cuh L168), and
# ggml_cuda_op_mul_mat_cublas (@8c44bc9 L1233-1268) first converts the whole weight matrix to F16 into a pool buffer
# (to_fp16_cuda(src0_dd_i, src0_as_f16, row_diff*ne00): read the quantized bytes, write 2 bytes per weight), then runs
# cublasGemmEx with CUBLAS_COMPUTE_16F on it -- the F16 path's GEMM plus one dequantization per matrix product, i.e.
# per ubatch. From the 2024-06-26 sync (@5378ea0d src/ggml-cuda/mmq.cu ggml_cuda_should_use_mmq L101-103:
# `if (int8_mma_available(cc)) return true;`, llama.cpp PR #8075 "use MMQ instead of cuBLAS by default") quantized
# products take MMQ at every column count on Turing and later. No constant of its own: the GEMM at
# LLAMACPP_CUBLAS, the conversion at llama.cpp's calibrated streaming rate (LLAMACPP_DECODE_BANDWIDTH, eq. 12 cap).
# MMQ's column tile on Turing and later: mmq_x up to 128 (ggml-org/ggml src/ggml-cuda/mmq.cuh @da232870
# get_mmq_x_max_host L94-102); each tile reads its weight rows (formulas/speed.py eq. 9'').
LLAMACPP_MMQ_TILE_COLUMNS = 128  # 0: no tile-read term (how LLAMACPP_MMQ_STEP is solved)
LLAMACPP_INT8_MMQ_SINCE = "ggml-org/ggml @5378ea0d (2024-06-26 sync of llama.cpp; PR #8075)"
_VOLTA_CAPABILITY = 7.0
# Volta (7.0 <= capability < 7.5) has FP16 tensor cores but no INT8 MMA: ggml_cuda_should_use_mmq sends a quantized
# product to MMQ only below MMQ_DP4A_MAX_BATCH_SIZE = 64 columns there (`turing_mma_available(cc)` false, then
# `return !fp16_mma_hardware_available(cc) || ne11 < MMQ_DP4A_MAX_BATCH_SIZE;`, ggml-org/llama.cpp
# ggml/src/ggml-cuda/mmq.cu @027ef876 L295-309; the define in mmq.cuh L12), so a prefill ubatch of 512 columns is
# dequantized to F16 and run through cuBLAS on current builds as on those before LLAMACPP_INT8_MMQ_SINCE.
_TURING_CAPABILITY = 7.5

# Issue cycles llama.cpp's Metal kernel_mul_mm spends per weight dequantizing its weight tiles (c_q of
# formulas/speed.py eq. 9m), per GGML type, COUNTED from the dequantize functions of ggml-org/ggml
# src/ggml-metal.metal @8c44bc9 (the 2024-05-14 sync of llama.cpp's file, the build of the May 2024 Apple rows; the
# Q4_0 and Q8_0 functions and kernel_mul_mm read the same in the November 2023 tree of build 8e672ef, the AP rows)
# at the M1-family cycle costs of philipturner/metal-benchmarks README @936d911: an arithmetic, bitwise or select
# operation 1 cycle, an integer -> float CONVERT 4, a shift (LSHIFT32) 4; float <-> half changes ride on the ALU
# operands (0); index and pointer arithmetic, which the compiler folds into addressing, and the loads and stores,
# which every type makes, do not count; the per-call set-up (scales, minima, masks of one 4x4 call) is spread over
# its 16 weights. F16 (L5558 dequantize_f16): a copy, 0. F32 (L5550): a float -> half change, 0. Q8_0 (L5652): per
# weight int8 -> half CONVERT (4), x d (1): 5. Q4_0 (L5566): per weight & mask (1), CONVERT (4), fma (1): 6; set-up
# d1 select, / 16, d2, md (4 x 1), mask0 select (1), mask1 shift (4): 9 / 16; 6.56. Q4_K (L5728,
# get_scale_min_k4_just2 L5722): per weight & mask, CONVERT, fma (6); set-up the 6-bit scale and min (2 ands for
# j < 4; 5 bitwise and 3 shifts, 17 cycles, for j >= 4; each half of the calls: 9.5), d select, / 16 (2), dl and ml
# each a CONVERT of the 6-bit value and a multiply (10), mask select (1): 22.5 / 16; 7.41. Q5_K (L5757): per weight
# & mask, & ul, select, CONVERT, add, fma (9); set-up Q4_K's plus the ul shift (4) and qh_val select (1): 27.5 / 16;
# 10.72. Q6_K (L5792): per weight ql & kmask2, qh & kmask1, shift (4), or, CONVERT (4), fma (12; the il & 1 branch is
# uniform over the call); set-up sc int8 -> half CONVERT (4), 3 selects of kmask1, kmask2, coef, 2 multiplies for ml
# and 2 for dl: 11 / 16; 12.69. A type absent here (Q2_K, Q3_K, the IQ types, MXFP4) has no count: eq. (9m) is then
# left out and named. Not fitted. Before (each operation 1 cycle, the CONVERT too, and an FMA of the simdgroup
# matrices 1 cycle: Q8_0 2, Q4_0 4.5 operations) Q4_0 prefill came out at 0.932 of Q8_0 on every chip, while the 22
# chips of llama.cpp discussion #4167 (validation rows AP01-AP50) measure 0.978-1.006; the shared CONVERT makes it
# 0.97. tests/hardware/test_metal_dequant.py checks the resulting Q4_K_M / F16 and Q4_0 / Q8_0 prefill ratios
# against the measured ones.
LLAMACPP_METAL_DEQUANT_CYCLES: dict[str, float] = {
    "F16": 0.0, "F32": 0.0, "Q8_0": 5.0, "Q4_0": 6 + 9 / 16, "Q4_K": 6 + 22.5 / 16, "Q5_K": 9 + 27.5 / 16,
    "Q6_K": 12 + 11 / 16,
}
LLAMACPP_METAL_DEQUANT_SOURCE = (
    "counted from ggml-org/ggml src/ggml-metal.metal @8c44bc9 dequantize_* (L5550-5820) that kernel_mul_mm "
    "(L6159-6290) runs on every weight tile of every 32-column tile, at the M1-family issue cycles of "
    "philipturner/metal-benchmarks @936d911; formulas/speed.py eq. (9m)")


def llamacpp_gemm_path(weights_format: str, device_kind: str, vendor: str, int8_mmq: bool = True,
                       capability: float | None = None) -> str | None:
    """The ggml-cuda kernel path of llama.cpp's matrix products for a GGUF file type on an NVIDIA GPU: 'mmq' for
    quantized types, 'cublas' for F16/BF16/F32 (see LLAMACPP_MMQ); None off NVIDIA GPUs or for non-GGUF weights.
    ``int8_mmq`` False: a build from before LLAMACPP_INT8_MMQ_SINCE, whose quantized prefill products on Volta and
    later (``capability`` >= 7.0, or unknown) are dequantized to F16 and run through cuBLAS (DEQUANT_CUBLAS_PATH); so
    are a prefill's on Volta (7.0 <= ``capability`` < 7.5) in every build (_TURING_CAPABILITY). ``capability`` is
    major.minor (8.9), not ``Device.capability``'s 89."""
    if not weights_format.startswith("gguf:") or device_kind != "gpu" or vendor != "NVIDIA":
        return None
    if weights_format in _CUBLAS_GGUF:
        return CUBLAS_PATH
    if not int8_mmq and (capability is None or capability >= _VOLTA_CAPABILITY):
        return DEQUANT_CUBLAS_PATH
    if capability is not None and _VOLTA_CAPABILITY <= capability < _TURING_CAPABILITY:
        return DEQUANT_CUBLAS_PATH  # Volta: no INT8 MMA, cuBLAS at 64 columns and more (_TURING_CAPABILITY)
    return MMQ_PATH


# llama.cpp's CPU backend, read at mainline as ikawrakow/ik_llama.cpp squash-merged it (commit 0ceeb11721f7, "Merge
# mainline llama.cpp", 2024-07-27; the XC rows' build 081fe431 is of 2024-07-23): ggml.c L12324-12331 first offers a
# product to llamafile_sgemm (tinyBLAS) with the F32 activations, then L12402-12408 with the activations converted
# to the weight type's vec_dot_type (Q8_0 for Q4_0/Q8_0); types tinyBLAS has no kernel for fall back to ggml's
# per-row vec_dot (ggml_vec_dot_q4_K_q8_K ...). ggml/src/llamafile/sgemm.cpp:
_LLAMACPP_CPU_SOURCE = ("llama.cpp ggml.c L12324-12331, L12402-12408; llamafile/sgemm.cpp L906-1009 (ik_llama.cpp "
                        "@0ceeb117); mainline ggml/src/ggml-cpu/llamafile/sgemm.cpp llamafile_sgemm (@02e86cfd)")
_LLAMACPP_CPU_KERNEL = {
    # L906-957: F16 weights x F32 activations, weights widened by _mm512_cvtph_ps / _mm256_cvtph_ps (L223-235) and
    # multiplied on the FP32 FMA units (madd = _mm512_fmadd_ps, L126-130)
    # (ARM with FP16 vector arithmetic: L931-942, F16 x F16 on FP16 FMAs, vfmaq_f16 L139-144)
    "gguf:f16": "tinyBLAS F16: x86 widens the weights to FP32 (vcvtph2ps) for the FP32 FMA units (ARM with FP16 "
                "arithmetic: FP16 FMAs)",
    "gguf:f32": "tinyBLAS F32 x F32 on the FP32 FMA units",
    # L962-1009 -> tinyBLAS_Q0_AVX (L587-): per 32-weight block an int8 dot product (updot, L787-794:
    # _mm256_dpbusd_epi32 with AVX-512 VNNI+VL, else maddubs + madd) converted to FP32 and one FP32 FMA with the two
    # blocks' F16 scales (L750-753); ARM with dotprod: tinyBLAS_Q0_ARM (L450-), sdot
    "gguf:q8_0": "tinyBLAS_Q0 (x86 AVX, ARM dotprod): activations quantized to Q8_0, per 32-block an int8 dot "
                 "product (vpdpbusd, or vpmaddubsw + vpmaddwd; ARM sdot) then one FP32 FMA with the blocks' scales",
    "gguf:q4_0": "tinyBLAS_Q0 (x86 AVX, ARM dotprod): activations quantized to Q8_0, per 32-block an int8 dot "
                 "product (vpdpbusd, or vpmaddubsw + vpmaddwd; ARM sdot) then one FP32 FMA with the blocks' scales",
    # sgemm.cpp's llamafile_sgemm had no BF16 case at the XC rows' build (ik_llama.cpp @0ceeb117 L849-1011: F32, F16,
    # Q8_0, Q4_0, else false): BF16 fell to ggml's per-row vec_dot (ggml.c L922-932 .vec_dot = ggml_vec_dot_bf16,
    # L1925-1983: _mm512_dpbf16_ps with AVX512_BF16, else widened to FP32). Mainline's llamafile_sgemm has a
    # `case GGML_TYPE_BF16` (ggml-org/llama.cpp @02e86cfd ggml/src/ggml-cpu/llamafile/sgemm.cpp): tinyBLAS<32, __m512,
    # __m512bh> whose madd is _mm512_dpbf16_ps under __AVX512BF16__, else tinyBLAS<16> (AVX512F) / <8> (AVX2) with
    # the BF16 loads widened to FP32 by a 16-bit shift and FP32 FMAs (probe19 D3: the text said tinyBLAS has none)
    "gguf:bf16": "tinyBLAS BF16 (mainline; builds of mid-2024 and before: ggml's per-row vec_dot_bf16): BF16 x BF16 "
                 "dot products on vdpbf16ps where the CPU has AVX512_BF16, else both widened to FP32 for FP32 FMAs",
    # mainline also routes Q5_0 and IQ4_NL (against Q8_0 activations) to tinyBLAS_Q0_AVX on x86 (@02e86cfd
    # llamafile_sgemm `case GGML_TYPE_Q5_0`, `case GGML_TYPE_IQ4_NL`); at @0ceeb117 they took ggml's vec_dot
    "gguf:q5_0": "tinyBLAS_Q0 on x86 AVX in mainline (earlier builds: ggml's per-row vec_dot): activations quantized "
                 "to Q8_0, per 32-block an int8 dot product then one FP32 FMA with the blocks' scales",
    "gguf:iq4_nl": "tinyBLAS_Q0 on x86 AVX in mainline (earlier builds: ggml's per-row vec_dot): activations "
                   "quantized to Q8_0, per 32-block an int8 dot product then one FP32 FMA with the blocks' scales",
}


def llamacpp_cpu_kernel(weights_format: str) -> tuple[str, str]:
    """(what llama.cpp's CPU backend runs for a GGUF type's prefill products, its source). The
    estimate times all of them at the FP32 FMA peak: F16 is FMA-bound; the Q8_0/Q4_0 kernel does an int8 dot and
    one FP32 FMA per 32-block, and its published rate on a Zen 4 (validation XC02/XC03 vs XC01: 118 and 104 vs 112
    tok/s) is the F16 rate, not a multiple of it, so no int8 peak bounds it there. BF16 runs ggml's own BF16 dot
    through tinyBLAS in mainline (vdpbf16ps on AVX512_BF16 CPUs, up to twice the FP32 FMA rate per instruction; no
    published row measures it, so it is timed at the FP32 peak too)."""
    what = _LLAMACPP_CPU_KERNEL.get(weights_format, "ggml's per-row vec_dot for the quantized type against "
                                    "Q8_0/Q8_K activations (int8 dot products; tinyBLAS has no kernel for it)")
    return what, _LLAMACPP_CPU_SOURCE


# Training on one device, data-parallel devices or each device of a tensor/pipeline-parallel run
# (formulas/training_time.py eqs. 6-8, formulas/model_parallel_time.py): the share of the dense BF16
# peak that the executed FLOPs (recomputation counted) reach on one device, communication and optimizer paging
# being separate terms. CALIBRATED on one named row: torchtune Llama2-7B LoRA (rank 8 on q,v, activation
# checkpointing, batch 4 x 2048) on 1 x RTX 4090, 2582 tokens/s (validation row PM0020, README @ca0a6de) ->
# 0.9218 of 165.2 TFLOP/s, counting the recomputation without each layer's last matmul (non-reentrant early stop,
# formulas/training_time.py eq. 2'), dividing by the GEMM shape efficiency (formulas/gemm_shapes.py: this row's
# rank-8 adapter GEMMs are memory-bound, 0.988) and taking out the step's memory-bound kernels (eager norms, rotary,
# SwiGLU, residual adds and the fp32 loss: 89.6 MB per token, 0.91 s of the 3.17 s micro-step at 0.8 x 1008 GB/s,
# formulas/elementwise_traffic.py eq. E7; the per-step optimizer work of formulas/optimizer_step.py is negligible
# here; before these terms the fit was 0.6539; 0.9218 before the flash-attention kernel was timed apart at its
# executed FLOPs, formulas/training_time.py eq. (10), FLASH_ATTENTION_SHARE below; 0.9422 before that kernel, the row's
# torchtune SDPA, was timed as FlashAttention-2, ATTENTION_KERNEL_SPEED, not at the Triton kernel's rate; 0.8882 before
# a recomputed attention forward was timed at the kernel's forward rate, formulas/training_time.py eq. (10''), and
# FLASH_ATTENTION_SHARE re-derived with it; 0.8919 before the attention kernel's rate follows FlashAttention-2's A100 curve by sequence (fa2_sequence_level, review26 D3): the row's 2048-token
# attention runs 0.82 x its 16k rate); re-derived by tests/hardware/test_training_calibration.py.
# Replaces PaLM's 46.2 % MFU (a 6144-chip run with its communication inside), which under-predicted single-device
# runs and over-predicted data-parallel runs over PCIe by up to +404 %.
# Checked (#12, "suspiciously high, one row"): the held-out compiled 4090 rows PM0702 / PM0704 (memory-bound kernels
# a tenth of their micro-step, against 29 % here) imply 0.994 / 0.937 by the same rule (0.974 / 0.925 before the
# attention kernel was timed apart), so PM0020's eager memory-bound term does not over-count on the 4090 and the row
# is not an outlier. PM0018 (compiled QLoRA, Llama2-7B, same README as PM0020) would need u > 1: its NF4
# dequantization is 0.05 s of a 2.97 s micro-step and it pages nothing, so neither term explains it (PM0704, the
# 2024-09 compiled QLoRA row, implies 0.937); PM0700 (full, paged 8-bit AdamW) needs u > 1 because its paging (all
# 16.1 GB of paged states in and out at 32 GB/s, 1.0 s per step: they do not fit the 3.5 GiB the step leaves free,
# and eviction in arrival order moves every byte, formulas/training_time.py eq. (12)) exceeds the 0.58 s its measured
# step leaves, while PM0024 (paged fp32 AdamW, 54 GB beside 4.8 GiB free) is +58 % with the same rule and would need
# ~14 GB/s per direction: no one paging rate fits both (bitsandbytes 0.43.1 to 0.43.3 page alike). Re-checked by
# tests/hardware/test_training_calibration.py test_held_out_ada_rows_imply_the_same_utilization.
TRAINING_DEVICE_UTILIZATION = Factor(
    "training_device_utilization", 0.9096, 0.9096, 0.9096,
    "calibrated: torchtune Llama2-7B LoRA 1 x RTX 4090 2582 tokens/s (PM0020), executed FLOPs / (peak x time)")
# The same share differs by GPU architecture: a Hopper part runs the same eager PyTorch step at a much smaller
# share of its 6x larger tensor peak (torchtitan's own note: 33-39 % MFU for Llama 3.1 8B FSDP on H100). CALIBRATED
# on one named row: torchtitan Llama 3.1 8B FSDP on 8 x H100 (500 W, HBM2e), 5762 tokens/s per GPU (PM0501,
# benchmarks/llama3_h100_202412_torchtitan.md Table 1), against the catalog's H100 SXM peak; re-derived by
# tests/hardware/test_training_calibration.py. The benchmark's GPUs are power-limited below an SXM part, so this
# under-predicts a 700 W H100 SXM by up to their peak ratio. The row's executed FLOPs include the op-level selective
# recomputation (every second matmul, formulas/training_time.py eq. (2'')) and the eager memory-bound kernels are
# timed apart (formulas/elementwise_traffic.py eq. E7, the op-level policy re-running every pointwise op), as is
# the optimizer step (formulas/optimizer_step.py): 0.4737 (0.3853 before these terms); 0.4743 since the collectives
# overlap by phase with the first all-gather and last reduce-scatter exposed (formulas/training_time.py eq. (8'));
# 0.4998 since the flash-attention kernel is timed apart (eq. (10), FLASH_ATTENTION_SHARE); 0.5633 since that kernel
# (SDPA's FlashAttention-2 backend) is timed on its mma.sync ceiling (#12); 0.4627 since it runs at FlashAttention-2's
# own speed, 1.85 x the Triton kernel's (ATTENTION_KERNEL_SPEED, attention_kernel_share); 0.4705 since a recomputed
# attention forward runs at the kernel's forward rate (eq. (10'')) and rho x u_ampere was re-derived with it (the row
# itself recomputes no attention: the op-level policy saves SDPA's output); 0.5301 since the row's memory-bound kernels
# (eqs. E7, F2) are timed at its GPUs' stated memory bandwidth, 2.4 TB/s (the H100 96GB HBM2e of the benchmark's
# Hardware section, validation_cases.torchtitan_h100), not the catalog SXM's 3.35 TB/s: at 3.35 TB/s they took too
# little of the measured step and u absorbed the rest. Its tensor peak is still the SXM's: the benchmark gives it only
# as "between SXM and NVL" (footnote 2), so 0.5301 is the low end of the u the row allows (the NVL's 835 TFLOP/s would
# give 0.660). Before (0.4705) the 700 W H100 SXM rows held out read slow: the MPT H100 tables -20 .. +10 % (their
# MPT-7B rows imply u 0.53-0.63), Megatron-Bridge's dense FP8 rows -27 / -33 % (PM1366 / PM1360); now -10 .. +25 %
# and -20 / -27 %; the MoE rows, already fast (+18 .. +28 %), read +24 .. +35 % (an open miss of their own). 0.5215
# since the row's SDPA attention runs at FlashAttention-2's measured H100 / A100 speed (1.69x at its 8192 tokens, Dao
# 2023 Figs. 4 and 7; attention_kernel_share), not the per-SM mma.sync rates' 1.59x: the held-out MPT H100 rows of one
# node, median |error| 9.8 % (0.4705) -> 6.7 % (0.5301) -> 2.9 %; Megatron-Bridge's PM1360 / PM1366 -28 / -21 %. 0.5281
# since the attention kernel's rate follows FlashAttention-2's A100 curve by sequence (fa2_sequence_level, review26 D3), with rho and u_ampere re-derived (the row's
# 8192-token attention 7 % slower).
# Ampere: CALIBRATED on seven named rows, the MPT-7B rows of llm-foundry's A100 80GB benchmark table on one node
# (validation_cases.AMPERE_CALIBRATION, PM0890-PM0896: FSDP FULL_SHARD on 8 x A100 SXM 80GB, 1k-64k tokens, with and
# without activation checkpointing, scripts/train/benchmarking/README.md @4952183): per row the u at which the
# duration rule gives the measured tokens/s (0.617-0.749 with the memory-bound kernels and the optimizer step
# timed apart, formulas/elementwise_traffic.py and optimizer_step.py; 0.609-0.708 and 0.6548 before), their median
# 0.6756 (0.6758 with the collectives overlapped by phase, formulas/training_time.py eq. (8')). Since the
# flash-attention kernel is timed apart (eq. (10)), these rows fit it jointly with FLASH_ATTENTION_SHARE: per-row u
# 0.690-0.756 (0.617-0.749 before: u fell with the sequence, the attention kernel's slowness showing in the GEMMs'
# share), median 0.7332; 0.695-0.756, median 0.7356, since each checkpointed row's recomputed attention forward runs
# at the Triton kernel's forward rate (formulas/training_time.py eq. (10''), ATTENTION_PASS_SHARES); 0.691-0.752,
# median 0.7316 (rho 0.4225 -> 0.4250), since the rows' loss is flash-attn's fused cross-entropy that llm-foundry runs
# (formulas/elementwise_traffic.py eq. (E11), 4c V per token, not the eager loss's 44 B per logit); 0.694-0.756,
# median 0.7348 (rho 0.4250 -> 0.4230), since Composer's two train-metric cross-entropies per micro-batch are counted
# (eq. (E12), 28 B per bf16 logit); 0.713-0.774, median 0.7520 (rho 0.4230 -> 0.4079, now the share at 16k tokens and
# beyond), since the attention kernel's rate follows FlashAttention-2's A100 curve by sequence (fa2_sequence_level, review26 D3); re-derived by
# tests/hardware/test_training_calibration.py. Every other A100 row (the rest of both MPT A100 tables, torchtune,
# Qwen) is held out.
# CDNA3 (AMD Instinct MI300X): CALIBRATED on one named row, torchao's float8 training benchmark on 8 x MI300X, its
# bf16 row: torchtitan llama3_8b.toml (Llama 3 8B, FSDP2, batch 1 x 8192, op-level SAC, torch.compile of the blocks
# and the loss), 5376.5 tokens/s per GPU (PM1341, torchao/float8/README.md @853f87d1b, 2025-08-11, torch
# 2.9.0.dev20250811+rocm6.4), against the catalog's MI300X dense BF16 peak (1307.4 TFLOP/s: 2048 FLOPS/clock/CU x 304
# CUs x 2.1 GHz, AMD's 'AMD Instinct MI300 series microarchitecture' table; dense, not the 2614.9 sparse figure, so no
# 2x mix-up); the u at which the duration rule meets the row, re-derived by tests/hardware/test_training_calibration.py.
# Why this row: it is the only MI300X bf16 row, and its setup has three more rows (the float8 tensorwise / rowwise /
# rowwise-with-bf16-grad_weight runs PM1343 / PM1347 / PM1345, the same script, torch and node): the tensorwise one
# fixes CDNA3's float8 share (FLOAT8_GEMM_SHARE_CDNA3 below; at Hopper's it measured 0.82 x the estimate), the other
# two stay held out. Before (Hopper's 0.4705 standing in, the lowest fitted
# share) the four rows measured 0.53-0.61 x the estimate. The mechanism is the share of the datasheet peak that
# ROCm's stack reaches, not a catalog error: 0.269 (0.2722 since the attention kernel's rate follows FlashAttention-2's A100 curve by sequence (fa2_sequence_level, review26 D3))
# here against Hopper's 0.4705 on the same torchtitan recipe (PM0501),
# i.e. 352 TFLOP/s of executed GEMM FLOPs per MI300X against 465 per H100 (0.5215, 516, since PM0501 is timed at its
# GPUs' 2.4 TB/s and its attention at FlashAttention-2's H100 speed); SemiAnalysis ("MI300X vs H100 vs H200
# Benchmark Part 1: Training", 2024-12-22) reports the same direction: the MI300X's "on paper specs ... are not
# representative of performance that can be expected in a real-world environment" (a cross-check, not an input; its
# GEMM table was not read here). RCCL: the row is compute-bound (FSDP2's collectives over the Infinity Fabric, 0.18 s
# per micro-step against 1.5 s of compute, overlapped by eq. (8')), so the row does not separate a slow collective
# from a slow GEMM: both land in u. Architectures without a row of their own: TRAINING_UTILIZATION_UNCALIBRATED below.
# Blackwell (B200, GB200, B300, GB300): CALIBRATED on one named row against its Hopper twin: Megatron-Bridge's Llama 3.1
# 405B FP8_CS pre-training on 256 x GB200 (NVL72 racks; TP 4, PP 16, VP 4), 864 tokens/s per GPU (PM1368,
# docs/performance-summary-archive.md @067f987df line 216), whose recipe runs on 1024 x H100 at 328 (PM1366, line 219).
# The rule: u_blackwell is the u at which PM1368's estimate / measured equals PM1366's at Hopper's u (0.854: the
# estimate of the H100 row is 15 % slow); re-derived by tests/hardware/test_training_calibration.py.
# Why a twin and not PM1368 alone: the published dense Blackwell rows are all Megatron FP8 rows, and on Hopper the same
# recipes read 15-19 % slow (PM1366, PM1360) at the calibrated u and FLOAT8_GEMM_SHARE (fitted on torchao's tensorwise
# float8, not TransformerEngine's current scaling): PM1368 alone would put that Megatron FP8 miss into Blackwell's u
# and every BF16 Blackwell run with it. The twin takes out what the two recipes share (the
# model, Megatron-Core, TransformerEngine's FP8 recipe, no recompute, the distributed optimizer) and pins only what
# differs by architecture. What it pins is the FP8 GEMM rate u x rho8 on Blackwell relative to Hopper's; it is put in
# u with rho8 taken as Hopper's (float8_gemm_share: no Blackwell BF16 / FP8 pair of one recipe is published), so the
# BF16 u of Blackwell is not measured on its own. Why not the BF16 rows: every published BF16 Blackwell training row is
# a mixture-of-experts run (GPT-OSS 120B, PM1364 / PM1365; torchtitan Qwen3-30B-A3B, pith-train #79), and Hopper's
# MoE rows already read 34-56 % fast at Hopper's u (an open miss of their own).
# One u or two (bwbf16, 2026-12): the one dense BF16 / FP8 pair of one recipe on datacenter Blackwell found is torchao's
# MX benchmark on 8 x B200 (PM1371 bf16 8307.5, PM1372 tensorwise float8 10417.0 tokens/s/GPU; torchtitan Llama 3 8B,
# PM1341's script; torchao mx_formats/README.md @d8bb51f6, 2025-08-15). Its float8 / bf16 gain is 1.254 (Hopper's
# PM1333 / PM1331: 1.250), which this u with Hopper's rho8 gives as 1.281 (within 2 %); a BF16 u of its own, the 0.228
# at which PM1371 alone is met, would make the same pair's gain 1.447 (the GEMMs then dominate the step): so the pair
# asks for one u across BF16 and FP8, and its 2x miss in level (+101 % / +105 %) is a slowdown of the whole step, not of
# the GEMMs alone. Its GPUs are 'limited to 750W' (75 % of the 1000 W TDP the catalog's peaks belong to), which no rule
# expresses (a power cap lowers the clock of every kernel: see the GB300 cap measurement below): held out (settings
# assumed), and no constant is fitted on them.
# Held out: PM1369 (the GB300 twin: -28 % at this u). Checked (bwbf16): the catalog's GB300 dense FP8 5000 / BF16 2500
# TFLOP/s and 8 TB/s are NVIDIA's GB300 NVL72 figures (rack '360 PF FP8 for training', '576 TB/s' over 72 GPUs,
# klockwood-gb300-nvl72) and equal the GB200's (NVIDIA's GB200 NVL72 table: FP8 10 PFLOPS sparse, 8 TB/s); the only
# recipe difference, PP 8 against PP 16 (the 288 GB), moves the estimate +0.3 % (bubble 0.0091 vs 0.0098); doubling
# the attention kernel (Blackwell Ultra's SFU, 10.7 vs 5 tera-exponentials/s, verda-gb300) would lift it at most 6 %
# (attention is 12.7 % of PM1369's compute). Left: the power limit (1400 W vs 1200 W; 1100 W vs 1000 W on HGX). The
# archive's other GB300 / GB200 gains, 1.05-1.24 (Llama 3 8B / 70B FP8, 25.11 and 26.04.01) and B300 / B200 1.12
# (GPT-OSS BF16), come with recipes the 288 GB changes (less CPU offload, a larger micro-batch, no recompute, CUDA
# graphs: the workload base configs @f9b6319e), so only PM1368 / PM1369 isolate the part. That the power limit binds
# Blackwell's GEMMs: facebookexperimental/triton pull 2023 (2026-07-14) measures cuBLAS GEMMs on a GB300 at its
# locked 2070 MHz at ~617 TFLOP/s under a 500 W cap against ~1600-2174 at 1400 W (and caps B200s at 750 W, GB200s at
# 1200 W, the power PM1371's node ran at); but no curve of sustained rate against power between 1200 and 1400 W was
# found to make it a rule, so PM1369 stays held out. PM1364 / PM1365 (+44 % / +73 %: the
# MoE miss). The attention kernel stays timed at the stand-ins' lowest share (attention_kernel_share: no FlashAttention-2,
# cuDNN or FlashAttention-4 speed on Blackwell is taken), and the uncalibrated-architecture rule keeps its stand-ins
# (CUDA_ARCHITECTURES), which this share, above Hopper's, would not lower.
TRAINING_UTILIZATION_BY_ARCH = {
    "ada": TRAINING_DEVICE_UTILIZATION,
    "ampere": Factor("training_device_utilization_ampere", 0.7520, 0.7520, 0.7520,
                     "calibrated: llm-foundry MPT-7B FSDP 8 x A100 80GB, median of 7 rows (PM0890-PM0896), executed "
                     "FLOPs / (A100 SXM peak x time)"),
    "hopper": Factor("training_device_utilization_hopper", 0.5281, 0.5281, 0.5281,
                     "calibrated: torchtitan Llama 3.1 8B FSDP 8 x H100 5762 tokens/s/GPU (PM0501, its GPUs' 2.4 TB/s), "
                     "executed FLOPs / (H100 SXM peak x time)"),
    "cdna3": Factor("training_device_utilization_cdna3", 0.2722, 0.2722, 0.2722,
                    "calibrated: torchao float8 benchmark, torchtitan Llama 3 8B FSDP2 + compile 8 x MI300X bf16 "
                    "5376.5 tokens/s/GPU (PM1341), executed FLOPs / (MI300X dense BF16 peak x time)"),
    "blackwell": Factor("training_device_utilization_blackwell", 0.5443, 0.5443, 0.5443,
                        "calibrated: Megatron-Bridge Llama 3.1 405B FP8_CS 256 x GB200 864 tokens/s/GPU (PM1368) at the "
                        "estimate / measured of its 1024 x H100 twin at Hopper's u (PM1366, 328: 0.854); rho8 "
                        "taken as Hopper's"),
}


# The fused attention kernel of a training step (flash-attn, PyTorch SDPA's flash backend, llm-foundry's Triton
# kernel) is timed apart from the GEMMs at its executed FLOPs (formulas/training_time.py eq. (10)) and at rho x the
# GEMM utilisation u of the architecture: a flash kernel's tiles are s x s blocks whose softmax, rescaling and
# masking run between the two matmuls on the CUDA cores, so it reaches less of the tensor peak than a large GEMM (Dao
# 2023, arXiv 2307.08691, section 3: the non-matmul FLOPs are 16x as expensive per FLOP on an A100). CALIBRATED with
# TRAINING_UTILIZATION_BY_ARCH['ampere'] on its seven named rows (validation_cases.AMPERE_CALIBRATION, PM0890-PM0896,
# MPT-7B on 8 x A100 80GB from 1k to 64k tokens, where attention is 4 % to 72 % of the time): rho is the value at
# which one GEMM utilisation describes the seven rows best (least spread of the per-row u, each solved through the
# one duration rule), u their median; re-derived by tests/hardware/test_training_calibration.py. Rows that test it
# out of sample: every other long-sequence row (MPT 125M-30B on A100 40GB/80GB and H100, 512-64k tokens).
# Tried and not taken (2026-12): the kernel at an absolute share a of the warp-level mma.sync rate, which
# FlashAttention-2 issues on Hopper too (csrc/flash_attn/src/kernel_traits.h: MMA_Atom<SM80_16x8x16_...> for every
# sm >= 80; half of Hopper's dense rate, LLAMACPP_SYNC_MMA_SHARE): fitted the same way (a 0.329, u_ampere 0.756) it
# brings the H100 32k-64k rows to -10 .. +7 % but Hopper's u refitted on PM0501 (0.568) over-predicts the H100
# 2k-token rows, and the summary median rises to 8.9 % (9.2 % with torchtitan's SDPA taken at the full rate).
# Taken instead (#12): rho and u_ampere as fitted, their product as the share of the mma.sync ceiling on Hopper
# (attention_kernel_share below): Ampere's rows do not move, the median falls to 7.7 %; since megcal2 the kernel's
# Ampere rate times FlashAttention-2's measured H100 / A100 speed (FA2_CAUSAL_FWD_BWD_TFLOPS) instead of the ceiling. Every kernel but this one is
# timed at its published speed over it (ATTENTION_KERNEL_SPEED below). rho is the kernel's forward + backward share;
# a checkpointed layer's recomputed forward is timed at the forward's rate (eq. (10''), ATTENTION_PASS_SHARES): 0.4571
# before, when six of the seven rows (checkpointed) charged it the backward's rate. Since review26 D3 rho is the share
# at 16k tokens and beyond: below 16k the kernel's rate is rho x u x FlashAttention-2's A100 rate at the length over its
# 16k rate (fa2_sequence_level, Dao 2023 Fig. 4; FA2_SEQUENCE_LEVEL_SOURCE below): 0.4230 -> 0.4079, u_ampere
# 0.7348 -> 0.7520, the seven rows' least log-spread of u 0.0254 -> 0.0245.
FLASH_ATTENTION_SHARE = Factor(
    "flash_attention_share_of_gemm_utilization", 0.4079, 0.4079, 0.4079,
    "calibrated with training_device_utilization_ampere: llm-foundry MPT-7B FSDP 8 x A100 80GB, 1k-64k tokens "
    "(PM0890-PM0896); the attention kernel's share of peak over the GEMMs' at 16k tokens and beyond (below, times "
    "FlashAttention-2's A100 rate at the length over its 16k rate, Dao 2023 Fig. 4)")

# On Hopper the training step's attention kernels issue warp-level mma.sync, not wgmma (FlashAttention-2:
# csrc/flash_attn/src/kernel_traits.h, MMA_Atom<SM80_16x8x16_...> for every sm >= 80, which PyTorch's SDPA flash backend
# vendors and which torch's nightlies of December 2024 still chose on H100 over cuDNN's wgmma kernel,
# pytorch/pytorch#142132, cuDNN made opt-in by pytorch/pytorch#138522: torchtitan's PM0501; llm-foundry's attn_impl
# triton, llmfoundry/models/layers/flash_attn_triton.py on triton_pre_mlir, setup.py's
# triton-pre-mlir@...vchiley/triton.git@triton_pre_mlir_sm90, a Triton from before Hopper support whose tl.dot lowers to
# mma.sync: the MPT H100 table), while Hopper's GEMM utilisation u is a share of the wgmma peak cuBLAS reaches: rho x
# u_hopper x peak (the rule before #12) timed them 2.2x their A100 rate, and the held-out H100 rows' error grew with the
# sequence. So the kernel is timed at its rate where rho was fitted, Ampere (rho x u_ampere x the A100's peak; FA2 and
# the Triton kernel issue the same instruction there), times FlashAttention-2's own H100 / A100 speed ratio at the
# row's sequence length and head width: NOT FITTED, read from one benchmark run on both GPUs (Dao 2023, arXiv
# 2307.08691: Fig. 4 (c)/(d) "Attention forward + backward speed (A100 80GB SXM4)" and Fig. 7 (c)/(d) the same on "H100
# 80GB SXM5", causal mask, head dim 64 / 128; the repository's assets/flash2_a100_fwd_bwd_benchmark.png and
# flash2_h100_fwd_bwd_benchmark.png @4f285b35, from benchmarks/benchmark_flash_attention.py: batch x sequence = 16k
# tokens, hidden 2048). The ratio is 1.60-1.74, rising with the sequence (FA2_CAUSAL_FWD_BWD_TFLOPS below), against
# the 1.59 of the per-SM mma.sync rates (sync_mma_share 0.5 x 989.4 / 312), the rule before (megcal2): that rule left
# the MPT H100 rows of 16k-64k tokens 9 points slower than those of 1k-4k once Hopper's u was fitted at PM0501's
# 2.4 TB/s. Its forward / backward split is taken as Ampere's (ATTENTION_PASS_SHARES stand): a cross-check, not an
# input, FlashAttention-3's forward and backward figures (Shah et al. 2024, arXiv 2407.08608, Figs. 4 and 5, as
# transcribed from the bar labels, not checked against the PDF here) put FlashAttention-2's H100 forward and backward
# at 370 / 322 TFLOP/s (non-causal, head dim 128, 16k): the backward 0.87 x the forward per FLOP, the 0.86 of Dao
# 2023's 63 % / 73 % on A100. Named assumptions: llm-foundry's Triton kernel gains what FlashAttention-2 gains (the
# same instruction; no H100 figure of it was found); beyond the figures' 512-16k tokens the end value holds; a head
# wider than 64 takes the 128 figures, one of 64 or less the 64 ones.
FLASH_ATTENTION_REFERENCE_ARCHITECTURE = "ampere"
FA2_PAPER_SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384)
FA2_PAPER_DEVICES = {"ampere": "a100-sxm-80gb", "hopper": "h100-sxm"}  # the catalog rows of the figures' GPUs
FA2_PAPER_DEVICE_PEAKS_TFLOPS = {"ampere": 312.0, "hopper": 989.4}  # their dense BF16 peaks, the catalog's (kept equal
# by tests/hardware/test_training_attention_sync.py): the share of the A100's peak is turned into TFLOP/s and back into
# a share of the H100's
FA2_CAUSAL_FWD_BWD_TFLOPS = {  # head dim -> TFLOP/s at FA2_PAPER_SEQ_LENS, Dao 2023 Fig. 4 (A100) and Fig. 7 (H100)
    "ampere": {64: (88.0, 119.0, 140.0, 156.0, 165.0, 171.0), 128: (99.0, 133.0, 155.0, 173.0, 182.0, 189.0)},
    "hopper": {64: (141.0, 192.0, 232.0, 257.0, 273.0, 284.0), 128: (163.0, 221.0, 265.0, 294.0, 308.0, 328.0)},
}
FA2_PAPER_SOURCE = ("Dao 2023 (arXiv 2307.08691) Fig. 4 (A100 80GB SXM4) and Fig. 7 (H100 80GB SXM5): FlashAttention-2 "
                    "forward + backward, causal")
# The kernel's rate by sequence (review26 D3; issue #12): the same figures' A100 bars rise 1.9x from 512 to 16k tokens
# (head dim 128: 99 -> 189 TFLOP/s; 64: 88 -> 171; with batch x sequence held at 16k tokens, so a short row has as
# many tiles, each query block fewer key blocks to amortise its loads, softmax epilogue and partly masked diagonal
# tile over). A flat rho x u (the rule before) took that curve into rho, fitted where the MPT-7B rows spend their
# attention time (16k-64k tokens), so every shorter row's attention ran too fast: the held-out MPT A100 rows (125M-70B,
# 512-64k tokens, 1-64 nodes) read +9.7 % (512), +10.5 % (2k) and +1.0 % (64k) as medians. So the
# level follows the curve: the kernel's A100 rate is rho x u x speed x FlashAttention-2's A100 rate at the row's
# length over its 16k rate (fa2_sequence_level; 1 from 16k on, where rho is now defined), and on Hopper the H100 / A100
# speed above multiplies that, i.e. the H100 bars themselves over the A100's 16k bar. NOT FITTED: the curve is the
# paper's; rho and u_ampere are re-derived with it on their seven named rows (tests/hardware/test_training_calibration.py
# derive_ampere). Evidence it belongs in the level, not in rho: the seven calibration rows cannot tell (their least
# log-spread of u is 0.0254 flat, 0.0245 with the curve: their short rows spend 4-10 % of their time in attention),
# the 132 held-out A100 rows can: median |error| 6.7 % -> 4.4 %, their medians by length +9.7 / +9.4 / +10.5 / +6.2 /
# +5.0 / +3.2 / +1.7 / +1.0 % (512 .. 64k) -> +6.7 / +6.3 / +8.3 / +4.4 / +3.5 / +3.0 / +1.2 / +0.1 % (the
# remaining short-row excess is not attention's). Named assumptions: every kernel (the Triton kernel, xformers' cutlass,
# flex, the wgmma kernels through FlashAttention-2's share) follows FlashAttention-2's A100 curve in shape; GPUs
# without a figure (Ada, CDNA3, Blackwell, ...) too; the curve is read at the causal length with the row's mean
# attended span (twice the mean keys per query of a sliding window or a packed document, formulas/attention_mask.py;
# the row's length where every layer is causal over it: estimate/duration.py).
FA2_LEVEL_NORMALISATION_SEQ_LEN = FA2_PAPER_SEQ_LENS[-1]
FA2_SEQUENCE_LEVEL_SOURCE = ("Dao 2023 (arXiv 2307.08691) Fig. 4 (A100 80GB SXM4): FlashAttention-2 forward + backward, "
                             "causal, at the length over at 16k tokens")


def _log2_interpolated(values: tuple[float, ...], seq_len: float) -> float:
    """``values`` at FA2_PAPER_SEQ_LENS, read at ``seq_len`` tokens: linear in log2 of the sequence between the
    figures' lengths, the end value outside 512-16k."""
    lo, hi = math.log2(FA2_PAPER_SEQ_LENS[0]), math.log2(FA2_PAPER_SEQ_LENS[-1])
    x = min(max(math.log2(max(seq_len, 1.0)), lo), hi)
    i = min(int(x - lo), len(values) - 2)
    f = x - math.log2(FA2_PAPER_SEQ_LENS[i])
    return values[i] * (1 - f) + values[i + 1] * f


def fa2_speed_over_reference(architecture: str, seq_len: float, head_dim: int) -> float | None:
    """FlashAttention-2's forward + backward TFLOP/s on ``architecture`` over its TFLOP/s on the reference
    architecture (FLASH_ATTENTION_REFERENCE_ARCHITECTURE, Ampere) at ``seq_len`` tokens and heads of ``head_dim``
    channels, from one published benchmark on both GPUs (FA2_CAUSAL_FWD_BWD_TFLOPS): linear in log2 of the sequence
    between the figures' lengths, the end value outside 512-16k; the head-dim-64 figures for heads of 64 or fewer
    channels, else the 128 ones. None for an architecture the figures do not cover."""
    if architecture not in FA2_CAUSAL_FWD_BWD_TFLOPS:
        return None
    width = 64 if head_dim <= 64 else 128
    return _log2_interpolated(tuple(h / a for h, a in zip(
        FA2_CAUSAL_FWD_BWD_TFLOPS[architecture][width],
        FA2_CAUSAL_FWD_BWD_TFLOPS[FLASH_ATTENTION_REFERENCE_ARCHITECTURE][width], strict=True)), seq_len)


def fa2_sequence_level(seq_len: float, head_dim: int) -> float:
    """FlashAttention-2's forward + backward TFLOP/s on the reference architecture (the A100, Dao 2023 Fig. 4,
    causal) at ``seq_len`` tokens over its TFLOP/s at the figures' longest, 16k (FA2_LEVEL_NORMALISATION_SEQ_LEN):
    linear in log2 of the sequence between the figures' lengths, 1 from 16k on; heads of 64 or fewer channels the
    head-dim-64 bars, else the 128 ones. The level FLASH_ATTENTION_SHARE is fitted at (see FA2_SEQUENCE_LEVEL_SOURCE)."""
    bars = FA2_CAUSAL_FWD_BWD_TFLOPS[FLASH_ATTENTION_REFERENCE_ARCHITECTURE][64 if head_dim <= 64 else 128]
    return _log2_interpolated(bars, seq_len) / _log2_interpolated(bars, FA2_LEVEL_NORMALISATION_SEQ_LEN)


# Which kernel runs the attention (specs/training.py TRAIN_ATTENTION_KERNELS, --attention-kernel) and how fast, as a
# ratio to llm-foundry's Triton kernel (attn_impl 'triton': flash_attn_triton.py on triton_pre_mlir), the kernel
# FLASH_ATTENTION_SHARE was fitted on, on the same instruction ceiling (every kernel here but cuDNN's and
# FlashAttention-3's issues warp-level mma.sync). NOT FITTED: read from the FlashAttention-2 paper (Dao 2023, arXiv
# 2307.08691, A100 80GB SXM4, head dims 64/128, 512-16k tokens): section 4.1, "FlashAttention-2 is around 1.3-1.5x
# faster than FlashAttention in Triton in the forward pass and around 2x faster in the backward pass" and "around 2x
# faster than FlashAttention and FlashAttention in xformers (the 'cutlass' implementation)"; section 1, FlashAttention-2
# reaches "up to 73% of the theoretical max throughput in the forward pass, and up to 63% ... in the backward pass".
# Over eq. (10)'s forward + backward (the backward 2.5 x the forward's FLOPs) that is FlashAttention-2 at 1.846 x the
# Triton kernel (formulas/training_time.py eq. (10'); 1.820 .. 1.872 over the forward's 1.3 .. 1.5), and xformers'
# cutlass kernel (torch SDPA's mem-efficient backend) at half FlashAttention-2's. The paper's Triton kernel is
# Tillet's (triton.ops.flash_attention), llm-foundry's is Dao's Triton port of it (flash_attn_triton.py @eff9fe6b, the
# file llm-foundry copied): an assumption that they run alike, named in the duration. Re-derived by
# tests/hardware/test_attention_kernels.py. Cross-checks, not inputs: FlashAttention-2 on Ampere at 1.846 x rho x
# u_ampere = 0.566 of 312 TFLOP/s at 16k tokens (0.574 with a flat rate, before fa2_sequence_level), the paper's
# forward + backward maximum at 73 % / 63 % being 0.656; on Hopper (that rate x the paper's own H100 / A100 speed,
# above) 307 TFLOP/s forward + backward at 16k tokens (311), against the paper's "up to 335 TFLOPs/s" on H100 (section
# 4.1, Fig. 7, forward + backward), and 308 TFLOP/s (0.31; 339 with a flat rate) in its forward at
# pytorch/pytorch#142132's 4608 tokens (ATTENTION_PASS_SHARES: 73 / 65.6 of the average) against FlashAttention-3's "FlashAttention-2 achieving only 35%
# utilization on the H100" (Shah et al. 2024, arXiv 2407.08608, abstract) and tritonbench's forward-only 329.5 TFLOP/s
# (pytorch/pytorch#142132; tritonbench's flash_attention operator times the forward unless --mode says otherwise).
FA2_FORWARD_OVER_TRITON = (1.3, 1.5)
FA2_BACKWARD_OVER_TRITON = 2.0
FA2_PEAK_SHARES = (0.73, 0.63)  # forward, backward
FA2_OVER_CUTLASS = 2.0
_FA2_LOW, _FA2_MID, _FA2_HIGH = (fwd_bwd_speed_ratio(r, FA2_BACKWARD_OVER_TRITON, *FA2_PEAK_SHARES)
                                 for r in (FA2_FORWARD_OVER_TRITON[0], sum(FA2_FORWARD_OVER_TRITON) / 2,
                                           FA2_FORWARD_OVER_TRITON[1]))
_DAO = "Dao 2023 (arXiv 2307.08691) section 4.1"
# torch FlexAttention's compiled Triton kernel against FlashAttention-2, per pass: 90 % of its forward and 85 % of its
# backward (PyTorch blog "FlexAttention: The Flexibility of PyTorch with the Performance of FlashAttention",
# pytorch.org/blog/flexattention, 2024-08-07, Performance section: "FlexAttention achieves 90% of FlashAttention2's
# performance in the forward pass and 85% in the backward pass"), measured on an A100 against FlashAttention-2. NOT
# FITTED; weighted into one speed by eq. (10'). On every GPU, Hopper too, the same ratios over FlashAttention-2's
# speed: no published flex ratio over the wgmma kernels (WGMMA_KERNEL_OVER_FA2 is not applied to flex).
FLEX_OVER_FA2_BY_PASS = (0.90, 0.85)
_FLEX_SOURCE = ("pytorch.org/blog/flexattention (2024-08-07): 90 % of FlashAttention-2's forward, 85 % of its backward, "
                "on an A100; on Hopper the same ratios over FlashAttention-2")
_FA2_OVER_FLEX = fwd_bwd_speed_ratio(1 / FLEX_OVER_FA2_BY_PASS[0], 1 / FLEX_OVER_FA2_BY_PASS[1], *FA2_PEAK_SHARES)
ATTENTION_KERNEL_SPEED = {
    "triton-flash": Factor("attention_kernel_speed_triton_flash", 1.0, 1.0, 1.0,
                           "the reference: llm-foundry's Triton FlashAttention, on which flash_attention_share_of_gemm_"
                           "utilization is fitted"),
    "flash-attn-2": Factor("attention_kernel_speed_flash_attn_2", _FA2_LOW, _FA2_MID, _FA2_HIGH,
                           f"{_DAO}: FlashAttention-2 1.3-1.5x FlashAttention-in-Triton forward, 2x backward; its "
                           "73 % / 63 % peak shares weight the passes (formulas/training_time.py eq. (10'))"),
    "mem-efficient": Factor("attention_kernel_speed_mem_efficient", _FA2_LOW / FA2_OVER_CUTLASS,
                            _FA2_MID / FA2_OVER_CUTLASS, _FA2_HIGH / FA2_OVER_CUTLASS,
                            f"{_DAO}: FlashAttention-2 2x xformers' cutlass kernel (torch SDPA's mem-efficient "
                            "backend)"),
    "flex-attention": Factor("attention_kernel_speed_flex_attention", _FA2_LOW / _FA2_OVER_FLEX,
                             _FA2_MID / _FA2_OVER_FLEX, _FA2_HIGH / _FA2_OVER_FLEX,
                             f"FlashAttention-2's speed / {_FA2_OVER_FLEX:.4g} ({_FLEX_SOURCE}, weighted by "
                             "formulas/training_time.py eq. (10'))"),
}
# Each kernel's shares of the peak by pass (forward, backward), for the recomputed forward of a checkpointed layer
# (formulas/training_time.py eq. (10''): timed at its forward's rate, not at the kernel's forward + backward rate).
# NOT FITTED, from the same paper lines as ATTENTION_KERNEL_SPEED (Dao 2023 sections 1 and 4.1): FlashAttention-2 at 73 %
# forward and 63 % backward; the Triton kernel 1.3-1.5x (mid 1.4x) slower forward and 2x slower backward, so its
# backward runs 0.60x its forward's rate per FLOP (FlashAttention-2's 0.86x). xformers' cutlass kernel has only its
# overall ratio published: FlashAttention-2's split (named below). cuDNN / FlashAttention-3 on Hopper: FlashAttention-2's
# split times their forward / backward ratios over it (WGMMA_OVER_FA2_BY_PASS below: #142132's forward, Shah et al.
# 2024 Fig. 5's backward), so their backward runs 0.73 / 0.79 x their forward's rate per FLOP; these two are not
# shares of one peak (FlashAttention-2's A100 shares times speed-ups), only the ratio S_b / S_f enters eq. (10'').
ATTENTION_PASS_SHARES = {
    "triton-flash": (FA2_PEAK_SHARES[0] / (sum(FA2_FORWARD_OVER_TRITON) / 2),
                     FA2_PEAK_SHARES[1] / FA2_BACKWARD_OVER_TRITON),
    "flash-attn-2": FA2_PEAK_SHARES,
    "flex-attention": (FA2_PEAK_SHARES[0] * FLEX_OVER_FA2_BY_PASS[0], FA2_PEAK_SHARES[1] * FLEX_OVER_FA2_BY_PASS[1]),
}
ATTENTION_PASS_SOURCE = (f"{_DAO}: FlashAttention-2 73 % / 63 % of the peak forward / backward, the Triton kernel 1.4x "
                         f"slower forward and 2x slower backward; FlexAttention: {_FLEX_SOURCE}")


def attention_pass_shares(kernel: str) -> tuple[tuple[float, float], str]:
    """(forward, backward) shares of the peak of a timed flash ``kernel`` (timed_attention_kernel) by pass, for eq.
    (10'') (only their ratio is used), and where they come from."""
    if kernel in ATTENTION_PASS_SHARES:
        return ATTENTION_PASS_SHARES[kernel], ATTENTION_PASS_SOURCE
    if kernel in _WGMMA_PASS_SHARES:  # Hopper only (timed_attention_kernel)
        r_f, r_b = WGMMA_OVER_FA2_BY_PASS[kernel]
        return _WGMMA_PASS_SHARES[kernel], (f"{ATTENTION_PASS_SOURCE}; {kernel}: FlashAttention-2's split x its "
                                            f"forward {r_f:.4g} (pytorch/pytorch#142132) and backward {r_b:.4g} "
                                            f"({FA3_PAPER_SOURCE}) over it")
    return FA2_PEAK_SHARES, (f"{ATTENTION_PASS_SOURCE}; no per-pass speed published for {kernel}: FlashAttention-2's "
                             "split taken")


# Hopper's warpgroup (wgmma) kernels, cuDNN's SDPA and FlashAttention-3 (hopper/ of flash-attn, built for sm90 only):
# FlashAttention-2's Hopper share times their speed over it, pass by pass (review26 D1: the forward ratio alone had
# timed the backward, 2.5 x the forward's FLOPs, 14 % fast). NOT FITTED.
# - Forward: pytorch/pytorch#142132 (torch 2.6.0.dev20241204, H100, (1, 24, 4608, 128) bf16 causal, tritonbench's
#   forward): SDPA's flash backend 329.483 TFLOP/s, cuDNN 631.338, FlashAttention-3 631.827.
# - Backward: FlashAttention-3's paper (Shah et al. 2024, arXiv 2407.08608) Fig. 5, "Attention backward speed, head
#   dim 128 (H100 80GB SXM5)", non-causal, FlashAttention-2 / cuDNN / FlashAttention-3 at 512-16k tokens
#   (FA3_PAPER_BACKWARD_TFLOPS_128), taken at #142132's 4608 tokens (linear in log2 of the sequence between 4k and 8k,
#   as fa2_speed_over_reference): cuDNN 1.613 x, FlashAttention-3 1.750 x. The paper's PDF and its figure were not
#   read here; the numbers are third-party transcriptions of the figure's bar labels (subtext.edge.nugit.net/image/
#   f60142e2..., two transcriptions, nemotron and gemini, that agree label for label); the flash-attention repository
#   @0251105a ships only the forward figure (assets/flash3_fp16_fwd.png) and no backward numbers
#   (hopper/benchmark_attn.py times them, prints none).
# - Combined by eq. (10') (formulas/training_time.py fwd_bwd_speed_ratio: the passes' times, the backward 2.5 x the
#   forward's FLOPs) at the wgmma kernel's own per-pass rates, FlashAttention-2's 73 % / 63 % split (Dao 2023) times
#   the two ratios (ATTENTION_PASS_SHARES): cuDNN 1.681 x, FlashAttention-3 1.790 x over FlashAttention-2's forward +
#   backward, not #142132's forward 1.916 / 1.918.
# Named assumptions: the pair holds at every sequence and head width (Fig. 5's cuDNN backward ratio is 1.43 at 512
# tokens, 1.57-1.63 at 1k-16k; FlashAttention-3's 1.48, 1.63-1.76); a causal backward gains what the non-causal one
# does (Fig. 5 has no causal panel); the paper's cuDNN (July 2024) backs #142132's (December 2024), whose forward
# ratio (1.92) is above the paper's own (causal, 4k: 518 / 319 = 1.62), so a newer cuDNN's backward may gain more too.
# Cross-check, not an input: FlashAttention-3's "speedup on H100 GPUs by 1.5-2.0x" over FlashAttention-2 (abstract).
# Elsewhere no published ratio: cuDNN off Hopper and FlashAttention-3 anywhere else are timed as FlashAttention-2,
# with a warning.
SDPA_FLASH_TFLOPS_H100 = 329.483
WGMMA_FORWARD_TFLOPS_H100 = {"cudnn": 631.338, "flash-attn-3": 631.827}  # pytorch/pytorch#142132
PR142132_SEQ_LEN = 4608
FA3_PAPER_BACKWARD_TFLOPS_128 = {  # Shah et al. 2024 Fig. 5 (head dim 128, H100), at FA2_PAPER_SEQ_LENS
    "flash-attn-2": (214.0, 260.0, 291.0, 310.0, 318.0, 322.0),
    "cudnn": (305.0, 408.0, 465.0, 499.0, 518.0, 516.0),
    "flash-attn-3": (316.0, 424.0, 501.0, 542.0, 559.0, 561.0),
}
FA3_PAPER_SOURCE = ("Shah et al. 2024 (arXiv 2407.08608) Fig. 5, backward, head dim 128, H100, non-causal; third-party "
                    "transcriptions of its bar labels (subtext.edge.nugit.net), the PDF not read")


WGMMA_OVER_FA2_BY_PASS = {  # kernel -> (forward, backward) speed over FlashAttention-2 on H100
    k: (WGMMA_FORWARD_TFLOPS_H100[k] / SDPA_FLASH_TFLOPS_H100,
        _log2_interpolated(tuple(c / f for c, f in zip(FA3_PAPER_BACKWARD_TFLOPS_128[k],
                                                         FA3_PAPER_BACKWARD_TFLOPS_128["flash-attn-2"], strict=True)),
                           PR142132_SEQ_LEN))
    for k in WGMMA_FORWARD_TFLOPS_H100
}
_WGMMA_PASS_SHARES = {k: (FA2_PEAK_SHARES[0] * r_f, FA2_PEAK_SHARES[1] * r_b)
                      for k, (r_f, r_b) in WGMMA_OVER_FA2_BY_PASS.items()}
_WGMMA_RATIO = {k: fwd_bwd_speed_ratio(r_f, r_b, *_WGMMA_PASS_SHARES[k]) for k, (r_f, r_b) in
                WGMMA_OVER_FA2_BY_PASS.items()}
WGMMA_KERNEL_OVER_FA2 = {
    k: Factor(f"attention_kernel_speed_{name}_over_fa2_hopper", _WGMMA_RATIO[k], _WGMMA_RATIO[k], _WGMMA_RATIO[k],
              f"eq. (10') of forward {WGMMA_OVER_FA2_BY_PASS[k][0]:.4g} x (pytorch/pytorch#142132: {label} "
              f"{WGMMA_FORWARD_TFLOPS_H100[k]} vs SDPA flash {SDPA_FLASH_TFLOPS_H100} TFLOP/s on H100, "
              f"{PR142132_SEQ_LEN} tokens) and backward {WGMMA_OVER_FA2_BY_PASS[k][1]:.4g} x ({FA3_PAPER_SOURCE}, "
              f"{label} / FlashAttention-2 at {PR142132_SEQ_LEN} tokens), weighted by its passes' times")
    for k, name, label in (("cudnn", "cudnn", "cuDNN"), ("flash-attn-3", "fa3", "FlashAttention-3"))
}
WGMMA_ARCHITECTURES = ("hopper",)


def attention_kernel_refusal(attention: str, kernel: str, architecture: str, capability: int | None, dtype: str,
                             heads_unmatched: bool, mask: bool, named: bool, head_dim: int
                             ) -> DeviceCannotRunError | None:
    """Why a fused attention ``kernel`` (TRAIN_ATTENTION_KERNELS, not eager) of the attention API ``attention``
    ('sdpa': torch's SDPA backends; 'flash': the flash-attn package or Triton; 'flex': torch's FlexAttention) cannot
    run on a GPU of ``architecture`` / ``capability`` with q/k/v in ``dtype`` and heads of ``head_dim`` channels, as
    the error to raise (on
    ``attention_kernel`` when ``named``, else on ``attention``), or None when it runs. The capability floors are
    formulas/sdpa_dispatch.py's, each with its source (one home): torch raises 'No available kernel' for a forced SDPA
    backend (sdp_utils.cpp, ``sdpa_refusal``), flash-attn 'FlashAttention only supports Ampere GPUs or newer.'
    (flash_api.cpp mha_fwd, ``flash_attn_refusal``), inductor GPUTooOldForTriton below sm70 (``flex_refusal``), llm-foundry's Triton kernel's fp16/bf16 and
    head_dim <= 128 asserts (``triton_flash_refusal``); SDPA's
    own dispatch ('sdpa') always finds a backend (math last). Read by every training answer on a named device
    (estimate/training/setup.py ``refuse_attention_kernel``) and by the duration (:func:`timed_attention_kernel`), so
    the memory, fit, recommend, plan and the duration refuse one workload with one message."""
    if kernel == "sdpa":
        return None
    if kernel in ("mem-efficient", "cudnn") or (kernel == "flash-attn-2" and attention == "sdpa"):
        refused = sdpa_refusal(kernel, capability, dtype, heads_unmatched, mask)
    elif kernel in ("flash-attn-2", "flash-attn-3"):
        refused = flash_attn_refusal(kernel, capability, dtype)
    elif kernel == "flex-attention":  # inductor's Triton kernels (no CPU or Apple: specs/training.py)
        refused = flex_refusal(capability)
    else:  # triton-flash: no capability check in llm-foundry's kernel, its dtype and head-width asserts
        refused = triton_flash_refusal(dtype, head_dim)
    if refused is None:
        return None
    field = "attention_kernel" if named else "attention"
    return DeviceCannotRunError(field, f"{field} {kernel if named else f'{attention} (its kernel {kernel})'} cannot run "
                                f"on {architecture or 'this GPU'}: {refused}")


def timed_attention_kernel(attention: str, kernel: str, architecture: str, capability: int | None, dtype: str,
                           heads_unmatched: bool, mask: bool, named: bool, head_dim: int
                           ) -> tuple[str, str, str | None]:
    """The kernel whose speed times a fused attention ``kernel`` (TRAIN_ATTENTION_KERNELS, not eager) of the
    attention API ``attention`` ('sdpa': torch's SDPA backends; 'flash': the flash-attn package or Triton) on a GPU of
    ``architecture`` / ``capability`` with q/k/v in ``dtype`` (formulas/sdpa_dispatch.py, one home): for 'sdpa' the
    backend torch's dispatcher picks (flash, mem-efficient or math: 'math' is timed as eager attention's score GEMMs);
    a kernel that cannot run there is refused (:func:`attention_kernel_refusal`'s error); a wgmma kernel off Hopper
    runs but has no published speed: timed as FlashAttention-2, with a warning. Returns (kernel, why, a warning or
    None)."""
    if kernel == "sdpa":
        return (*sdpa_backend(capability, dtype, heads_unmatched, mask), None)
    refused = attention_kernel_refusal(attention, kernel, architecture, capability, dtype, heads_unmatched, mask, named,
                                       head_dim)
    if refused is not None:
        raise refused
    if kernel in WGMMA_KERNEL_OVER_FA2 and architecture not in WGMMA_ARCHITECTURES:
        return "flash-attn-2", (f"{kernel} {'given' if named else 'by default'}; timed as flash-attn-2: no published "
                                f"{kernel} speed on {architecture or 'this GPU'} (WGMMA_KERNEL_OVER_FA2 is Hopper's, "
                                "pytorch/pytorch#142132)"), (
            f"attention kernel {kernel} has no published speed on {architecture or 'this GPU'} "
            "(its ratio over FlashAttention-2 is measured on Hopper, sm90, pytorch/pytorch#142132): timed as "
            "FlashAttention-2")
    return kernel, "given" if named else "the attention's default kernel", None


def _attention_share_of(kernel: str, architecture: str, u: float, seq_len: float, head_dim: int
                        ) -> tuple[float, str | None]:
    rho = FLASH_ATTENTION_SHARE.expected
    if kernel in WGMMA_KERNEL_OVER_FA2:  # Hopper only (timed_attention_kernel)
        fa2, fa2_why = _attention_share_of("flash-attn-2", architecture, u, seq_len, head_dim)
        ratio = WGMMA_KERNEL_OVER_FA2[kernel]
        # the why names both factors: the ratio and what sets FlashAttention-2's share (on Hopper Dao 2023's
        # sequence-dependent H100 / A100 speed, Figs. 4 / 7), so the printed assumption traces the number
        return fa2 * ratio.expected, (f"{kernel} issues wgmma: {ratio.expected:.4g} x FlashAttention-2's share on "
                                      f"{architecture} ({ratio.source})"
                                      + (f"; FlashAttention-2's share: {fa2_why}" if fa2_why else ""))
    speed = ATTENTION_KERNEL_SPEED[kernel].expected
    level = fa2_sequence_level(seq_len, head_dim)
    width = 64 if head_dim <= 64 else 128
    at = (f"FlashAttention-2's A100 rate at {seq_len:.0f} tokens over its 16k rate, {level:.4g} (head dim {width}; "
          f"{FA2_SEQUENCE_LEVEL_SOURCE})")
    sync = sync_mma_share(architecture)
    if sync is None:
        return speed * rho * u * level, (f"{kernel}'s speed {speed:.4g} x {FLASH_ATTENTION_SHARE.name} x the GEMM "
                                         f"utilisation x {at} (estimate/efficiency.py attention_kernel_share)")
    ref = FLASH_ATTENTION_REFERENCE_ARCHITECTURE
    gain = fa2_speed_over_reference(architecture, seq_len, head_dim)
    peaks = FA2_PAPER_DEVICE_PEAKS_TFLOPS
    if gain is None or architecture not in peaks:  # no published FlashAttention-2 speed there: the per-SM rates
        return (sync.expected * speed * rho * TRAINING_UTILIZATION_BY_ARCH[ref].expected * level,
                f"the attention kernel issues warp-level mma.sync ({kernel}): {sync.expected:g} x the dense peak on "
                f"{architecture} ({sync.name}) x {speed:.4g} ({kernel} over the Triton kernel) x "
                f"{FLASH_ATTENTION_SHARE.name} x the {ref} utilisation x {at} (estimate/efficiency.py "
                "attention_kernel_share)")
    return (gain * peaks[ref] / peaks[architecture] * speed * rho * TRAINING_UTILIZATION_BY_ARCH[ref].expected * level,
            f"the attention kernel issues warp-level mma.sync ({kernel}), timed at its {ref} rate ({speed:.4g} x the "
            f"Triton kernel's, x {FLASH_ATTENTION_SHARE.name} x the {ref} utilisation x the {ref} peak x {at}) x "
            f"FlashAttention-2's {architecture} / {ref} speed, {gain:.4g} at {seq_len:.0f} tokens and head dim "
            f"{width} ({FA2_PAPER_SOURCE}; estimate/efficiency.py attention_kernel_share)")


def attention_kernel_share(kernel: str, architecture: str, u: float, *, seq_len: float, head_dim: int
                           ) -> tuple[float, str | None]:
    """The share of the dense BF16 peak a training step's fused attention ``kernel`` (a timed kernel:
    timed_attention_kernel) reaches on a GPU ``architecture`` whose GEMMs reach ``u``, at ``seq_len`` tokens with
    heads of ``head_dim`` channels: speed x rho x u x FlashAttention-2's A100 rate at that sequence over its 16k rate
    (ATTENTION_KERNEL_SPEED, FLASH_ATTENTION_SHARE, fa2_sequence_level); where warp-level mma.sync cannot reach the
    dense peak (sync_mma_share: Hopper), the kernel's rate on Ampere at that sequence (speed x rho x u_ampere x the
    A100's peak x the level) x FlashAttention-2's published Hopper / Ampere speed at that sequence and head width
    (fa2_speed_over_reference), as a share of the H100's peak (see above); Hopper's wgmma kernels, FlashAttention-2's
    share times WGMMA_KERNEL_OVER_FA2; an architecture without a calibration row, the lowest share of its stand-ins
    (stand_in_architectures, the rule of TRAINING_UTILIZATION_UNCALIBRATED). ``seq_len``: the causal length with the
    row's mean attended span (estimate/duration.py). Returns the share and why, every factor named."""
    if architecture in TRAINING_UTILIZATION_BY_ARCH and architecture not in ATTENTION_STAND_IN_ARCHITECTURES:
        return _attention_share_of(kernel, architecture, u, seq_len, head_dim)
    arch, (share, _) = min(((a, _attention_share_of(kernel if a in WGMMA_ARCHITECTURES or kernel not in
                                                              WGMMA_KERNEL_OVER_FA2 else "flash-attn-2", a,
                                                    TRAINING_UTILIZATION_BY_ARCH[a].expected, seq_len, head_dim))
                            for a in stand_in_architectures(architecture)), key=lambda x: x[1][0])
    what = ("no attention speed established on this GPU architecture (ATTENTION_STAND_IN_ARCHITECTURES)"
            if architecture in ATTENTION_STAND_IN_ARCHITECTURES else "no calibration row for this GPU architecture")
    return share, (f"{what}: the lowest {kernel} share of the calibrated architectures, {arch}'s "
                   "(estimate/efficiency.py attention_kernel_share)")

# Float8 training (formulas/float8_training.py): the converted linears' GEMMs (torch._scaled_mm, TransformerEngine's
# cuBLASLt FP8 GEMMs) run at the dense FP8 peak times rho8 x the BF16 GEMM utilisation u: an FP8 GEMM of the same
# shape does half the bytes per FLOP, against a scaling epilogue and a smaller K-tile per pipeline stage (0.9191 when
# the attention ran at rho x u_hopper; 1.0272 on its mma.sync ceiling at the Triton kernel's rate; 0.8646 since the
# row's SDPA attention runs at FlashAttention-2's speed, attention_kernel_share; 0.8752 with rho and u_hopper re-derived
# for eq. (10''); 0.8757 since NCCL's NVLink bus bandwidth times the FSDP collectives, formulas/network.py eq. (12);
# 0.8848 since the row's casts and memory-bound kernels run at its GPUs' stated 2.4 TB/s, with u 0.5301; 0.8740 since
# its attention runs at FlashAttention-2's measured H100 / A100 speed, with u 0.5215; 0.8825 since its attention's rate
# follows FlashAttention-2's A100 curve by sequence, fa2_sequence_level, with u 0.5281).
# CALIBRATED on one named row: torchtitan Llama 3.1 8B FSDP + torch.compile + Float8
# (torchao tensorwise dynamic scaling, float8 all-gather) on 8 x H100, 8532 tokens/s per GPU (PM0503,
# benchmarks/llama3_h100_202412_torchtitan.md Table 1), with Hopper's u from its BF16 twin PM0501 and the casts timed
# apart (formulas/float8_training.py eq. F2): the rho8 at which the duration rule meets the row; re-derived by
# tests/hardware/test_training_calibration.py. Held out: the same table's 128-GPU float8 row (PM0506) and llm-foundry's
# seven TransformerEngine FP8 rows on H100 (PM0870-PM0876).
FLOAT8_GEMM_SHARE = Factor(
    "float8_gemm_share_of_gemm_utilization", 0.8825, 0.8825, 0.8825,
    "calibrated: torchtitan Llama 3.1 8B FSDP + compile + Float8 8 x H100 8532 tokens/s/GPU (PM0503); the FP8 "
    "GEMMs' share of the FP8 peak over the BF16 GEMMs' share of the BF16 peak")
# CDNA3 (AMD Instinct MI300X): its own rho8, the FP8 GEMMs (torch._scaled_mm and TransformerEngine on ROCm: hipBLASLt)
# at training shapes. A SOURCED figure was looked for first and does not describe them: AMD's "Measuring
# Max-Achievable FLOPs - Part 2" (rocm.blogs.amd.com, 2025-02-28; ROCm/rocm-blogs
# blogs/software-tools-optimization/measuring-max-achievable-flops-part2/README.md, Table 1) gives the MI300X's
# hipblaslt-bench maxima at one CU-balanced shape (K = 32896; a hipBLASLt branch targeted at ROCm 6.5): "MAF BF16
# 708 TFLOPs", "MAF FP8 1273 TFLOPs", i.e. 0.541 of the 1307.4 dense BF16 peak and 0.487 of the 2614.9 FP8 one, a
# share ratio of 0.899 -- Hopper's 0.8740, not less; applied here it moves the three held-out rows from +9..+24 %
# to +10..+26 %. At training shapes on the torch ROCm builds the FP8 path reaches far less of its peak
# (pytorch/pytorch#143465, 2024-12: torch._scaled_mm "~100TFLOP/s" on MI300X at Llama 70B's shapes on a nightly;
# ROCm/TransformerEngine#73, 2024-10: FP8 te.Linear at about parity with bf16 F.Linear), and no source gives the
# FP8 and BF16 GEMMs' TFLOP/s at LLM shapes on the rows' stack (torch 2.9.0.dev20250811+rocm6.4). So CALIBRATED on
# one named row, the CDNA3 twin of Hopper's PM0503: torchao's float8 benchmark on 8 x MI300X, tensorwise with
# float8 all-gather, 6166 tokens/s per GPU (PM1343, torchao/float8/README.md @853f87d1b; the same script, torch and
# node as PM1341, which fixes CDNA3's u): the rho8 at which the duration rule meets the row; re-derived by
# tests/hardware/test_training_calibration.py. Held out, before -> after: the rowwise_with_gw_hp row PM1345
# (+8.8 % -> -4.6 %) and the rowwise row PM1347 (+24.3 % -> +2.1 %, hipBLASLt's rowwise-scaled GEMM on ROCm: no
# FLOAT8_ROWWISE_GEMM_SHARE); SemiAnalysis's TransformerEngine FP8 rows on 8 x MI300X (settings assumed, not
# summarised) fall from +3.9 / -2.6 % to -14.4 / -19.8 % (PM1352 / PM1353) because their bf16 twin PM1350 is
# already -15.1 % (that stack's bf16 u, not the FP8 share): their FP8-over-BF16 speed-up, 1.155 measured (PM1353 /
# PM1350), was predicted 1.325 and is now 1.090. An uncalibrated AMD Instinct architecture (CDNA 4: MI355X) takes
# this share (stand_in_architectures, as for u); every other one Hopper's (FLOAT8_GEMM_SHARE). 0.6369 before
# the attention kernel's rate follows FlashAttention-2's A100 curve by sequence (fa2_sequence_level, review26 D3), with CDNA3's u 0.2722.
FLOAT8_GEMM_SHARE_CDNA3 = Factor(
    "float8_gemm_share_of_gemm_utilization_cdna3", 0.6388, 0.6388, 0.6388,
    "calibrated: torchao float8 benchmark, torchtitan Llama 3 8B FSDP2 + compile + Float8 tensorwise 8 x MI300X 6166 "
    "tokens/s/GPU (PM1343); the FP8 GEMMs' share of the FP8 peak over the BF16 GEMMs' share of the BF16 peak (AMD's "
    "max-achievable FLOPs at one ideal shape give 0.899, not reached at training shapes on ROCm 6.4's torch)")


def float8_gemm_share(architecture: str | None) -> Factor:
    """rho8 of a GPU architecture: CDNA3's own for AMD Instinct parts ('cdna*', UNCALIBRATED_STAND_INS), Hopper's
    (FLOAT8_GEMM_SHARE) for every other one (one not named included)."""
    cdna = stand_in_architectures(architecture or "") == UNCALIBRATED_STAND_INS["cdna"]
    return FLOAT8_GEMM_SHARE_CDNA3 if cdna else FLOAT8_GEMM_SHARE
# torchao's rowwise float8 recipes on an NVIDIA GPU (formulas/float8_training.py eqs. F4-F5): torch._scaled_mm with
# per-row scales runs CUTLASS's f8f8bf16_rowwise (torch aten/src/ATen/native/cuda/Blas.cpp, _scaled_mm_out_cuda: the
# rowwise branch calls at::cuda::detail::f8f8bf16_rowwise, not cuBLASLt, for the torch of these rows; ROCm's branch
# runs hipBLASLt and is not scaled), the tensorwise recipe cuBLASLt (torchao config.py @36027d82 lines 147-149:
# "TENSORWISE ... with the cuBLAS tensorwise kernel. Fastest option", "ROWWISE: ... with the CUTLASS rowwise
# kernel"). The rowwise kernel's rate as a share of FLOAT8_GEMM_SHARE's. CALIBRATED on two named rows of one table
# (torchao float8 README @8c81863ba, 8 x H100, torchtitan llama3_8b.toml, FSDP2, compile, op-level SAC): rowwise 6768
# tokens/s per GPU (PM1335) over its tensorwise twin 7689.5 (PM1333), 0.880: the share at which the duration rule's
# PM1335 / PM1333 ratio meets it, 0.8609 (0.8604 before the attention ran at FlashAttention-2's measured H100 speed,
# 0.8635 before its rate followed FlashAttention-2's A100 curve by sequence, fa2_sequence_level;
# the rest of the rule, bf16 all-gather and F4's casts included, as it stands);
# re-derived by tests/hardware/test_training_calibration.py. Both rows excluded from the summary. Held out: the
# AsyncTP table's rowwise rows (PM1314/PM1315/PM1320/PM1321), whose rowwise/tensorwise ratios are 0.73-0.74.
FLOAT8_ROWWISE_GEMM_SHARE = Factor(
    "float8_rowwise_gemm_share_of_tensorwise", 0.8609, 0.8609, 0.8609,
    "calibrated: torchao float8 README 8 x H100 Llama 3 8B rowwise 6768 over tensorwise 7689.5 tokens/s/GPU "
    "(PM1335 / PM1333); CUTLASS f8f8bf16_rowwise against cuBLASLt's tensorwise FP8 GEMM")


def float8_rowwise_share(recipe: str, vendor: str) -> Factor | None:
    """FLOAT8_ROWWISE_GEMM_SHARE where it applies: a torchao rowwise recipe on an NVIDIA GPU; None otherwise."""
    return FLOAT8_ROWWISE_GEMM_SHARE if vendor == "NVIDIA" and recipe.startswith("torchao-rowwise") else None


# Training on a CPU with a BF16 matrix unit (Intel AMX): the share of the AMX peak (cores x all-core clock x 1,024
# BF16 FLOP per cycle, the catalog's derived 'bf16' value) that the executed FLOPs reach. CALIBRATED on one named
# row: Intel's Cloud Optimization Module, GPT-2 small (124M) full fine-tuning, bf16 autocast + IPEX O1, AdamW, batch
# 32 x 1024 tokens per iteration, eager ("slow") attention, torch 1.13, on one GCP c3-highmem-8 (4 Sapphire Rapids
# cores): median 40.76 s per iteration (PM0600). The step's memory-bound kernels (formulas/elementwise_traffic.py eq.
# E7, 6.63 MB per token: 16.91 s) and the AdamW update (formulas/optimizer_step.py: 0.27 s) are timed apart at
# MEMORY_BOUND_BANDWIDTH_CPU x the VM's share of the socket's bandwidth (27.9 GB/s, the catalog entry), as on a GPU;
# the GEMMs' 2.293 s at the whole peak then take the remaining 23.58 s: u = 0.0972 (0.0563 before the memory-bound
# terms); re-derived by tests/hardware/test_training_calibration.py. Assumed to hold per core for larger Xeons (one
# VM of 4 cores is the only row).
TRAINING_UTILIZATION_CPU_AMX = Factor(
    "training_device_utilization_cpu_amx", 0.0972, 0.0972, 0.0972,
    "calibrated: Intel ICOM GPT-2 small bf16 IPEX full fine-tune on 1 x GCP c3-highmem-8 (4 SPR cores), 32 x 1024 "
    "tokens per 40.76 s (PM0600), GEMM FLOPs / (AMX BF16 peak x (time - memory-bound kernels - optimizer step))")
# Training on a CPU's vector units (no BF16 matrix unit, or an fp32/fp16 recipe): the share of the FP32 FMA peak
# (cores x all-core clock x FP32 FLOP per cycle: 64 with two AVX-512 FMA units, the catalog's 'fp32' value) that the
# executed FLOPs reach. CALIBRATED on one named row: the same Intel ICOM GPT-2 small recipe (bf16 autocast + IPEX O1,
# AdamW, batch 32 x 1024, eager attention, torch 1.13) on one AWS m6i.4xlarge (8 Ice Lake cores, AVX-512 without AMX
# or AVX512_BF16, so oneDNN runs the bf16 GEMMs on the FP32 FMA units): median 118.95 s per iteration (PM0602); with
# the memory-bound kernels (9.22 s) and the optimizer step (0.15 s) timed apart at the VM's 51.2 GB/s share as above,
# the GEMMs' 15.72 s at the whole 1.792 TFLOP/s peak take the remaining 109.58 s: u = 0.1435 (0.1322 without those
# terms); re-derived by tests/hardware/test_training_calibration.py. Per core the GEMMs run at 0.032 TFLOP/s against
# AMX's 0.299 (PM0600): 9.3x, the speed AMX buys. Assumed for every CPU timed on its FP32 peak: an fp32 recipe (the
# same FMA units, without the bf16 conversions), AVX2-only parts (the one row is AVX-512) and the catalog's FP32
# peaks that are not derived from cores x clock x FMA width (huggingface.js' approximate figures, marked low
# confidence); the duration names the factor. Held out: the same recipe on an Azure D32_v5 (16 Ice Lake cores,
# PM0603, 1,384 tokens/s) implies 2.5x this share per core; it is predicted -57 % (an open discrepancy between two
# Intel-published runs of the same code, not explained by cores, clock or bandwidth).
TRAINING_UTILIZATION_CPU_VECTOR = Factor(
    "training_device_utilization_cpu_vector", 0.1435, 0.1435, 0.1435,
    "calibrated: Intel ICOM GPT-2 small bf16 IPEX full fine-tune on 1 x AWS m6i.4xlarge (8 Ice Lake cores, AVX-512, "
    "no AMX), 32 x 1024 tokens per 118.95 s (PM0602), GEMM FLOPs / (FP32 FMA peak x (time - memory-bound kernels - "
    "optimizer step))")


# A GPU architecture without a calibration row of its own (Blackwell, Apple GPUs, Volta/Turing, AMD, a hardware
# file's GPU without 'architecture'): the LOWEST of the fitted architectures' shares (today Hopper's), a rule, not a
# fit. Why the minimum: the fitted share falls as the tensor peak grows (Ada 165 TFLOP/s -> 0.92, Ampere 312 -> 0.68,
# Hopper 989 -> 0.56), because the eager step's memory-bound kernels, launches and host work do not speed up with
# the tensor cores; an unknown part is either faster than Hopper (Blackwell) or its software stack is less
# tuned (Apple MPS, older or other vendors' parts), and for both the least share any calibrated architecture
# reached is the one that does not promise a step faster than one measured per peak FLOP/s. Ada's share applied
# to an 8 x B200 run made it 3.66x faster than 8 x H100 for a peak ratio of 2.27x (8B full fine-tune, ZeRO-3).
# The duration names this factor and warns that the architecture has no calibration row (estimate/duration.py
# training_duration).
# Which calibrated architectures the minimum runs over: the NVIDIA (CUDA: cuBLAS, NCCL) ones. CDNA3's share (0.2722,
# PM1341) is ROCm's stack on an AMD part (hipBLASLt, RCCL), not a bound on an NVIDIA one: with it in the minimum an
# 8 x B200 run would be timed 1.75x slower than on Hopper's share for no measured reason. An uncalibrated AMD Instinct
# architecture (CDNA 2, CDNA 4: MI250X, MI355X) takes CDNA3's instead, the same vendor's stack
# (TRAINING_UTILIZATION_UNCALIBRATED_CDNA); no MI250X or MI355X training row is compared, so whether it holds there
# is not known (an assumption the duration names).
CUDA_ARCHITECTURES = ("ada", "ampere", "hopper")
# Architectures whose GEMM utilisation is calibrated but whose attention kernel's speed is not established: their
# attention is timed at the stand-ins' lowest share (attention_kernel_share). Blackwell: its u is fitted on a Megatron
# FP8 twin (TRAINING_UTILIZATION_BY_ARCH['blackwell']); no FlashAttention-2 / cuDNN / FlashAttention-4 training speed
# on it is taken, and its tensor cores are not Hopper's (tcgen05, not wgmma; sync_mma_share)
ATTENTION_STAND_IN_ARCHITECTURES = ("blackwell",)
UNCALIBRATED_STAND_INS: dict[str, tuple[str, ...]] = {"cdna": ("cdna3",)}  # architecture prefix -> calibrated ones


def stand_in_architectures(architecture: str) -> tuple[str, ...]:
    """The calibrated architectures whose lowest share stands in for an uncalibrated ``architecture``: the same
    family's (UNCALIBRATED_STAND_INS: AMD Instinct 'cdna*' -> CDNA3), else the NVIDIA ones (CUDA_ARCHITECTURES)."""
    for prefix, archs in UNCALIBRATED_STAND_INS.items():
        if architecture.startswith(prefix):
            return archs
    return CUDA_ARCHITECTURES


def _least_fitted(name: str, archs: tuple[str, ...]) -> Factor:
    f = min((TRAINING_UTILIZATION_BY_ARCH[a] for a in archs), key=lambda x: x.expected)
    return Factor(name, f.low, f.expected, f.high,
                  f"no calibration row for this GPU architecture: the lowest fitted share of the calibrated "
                  f"architectures ({', '.join(sorted(archs))}), {f.name} = {f.expected:g} (the share falls as the "
                  "tensor peak grows; see estimate/efficiency.py)")


TRAINING_UTILIZATION_UNCALIBRATED = _least_fitted("training_device_utilization_uncalibrated", CUDA_ARCHITECTURES)
TRAINING_UTILIZATION_UNCALIBRATED_CDNA = _least_fitted("training_device_utilization_uncalibrated_cdna",
                                                       UNCALIBRATED_STAND_INS["cdna"])


# An architecture whose calibration rows ran on some of its parts only: the CUDA compute capabilities (major x 10 +
# minor) the rows stand for. Blackwell's row (PM1368, GB200) is datacenter Blackwell, 10.x (B200 / GB200 10.0, B300 /
# GB300 10.3: tcgen05 tensor cores, HBM); GeForce / RTX PRO Blackwell (12.0) and the GB10 (12.1) issue mma.sync (see
# sync_mma_share) from GDDR7 / LPDDR5X and no row measures them: they keep the uncalibrated stand-in.
CALIBRATED_CAPABILITIES: dict[str, tuple[int, ...]] = {"blackwell": (100, 103)}


def training_utilization(architecture: str, capability: int | None = None) -> tuple[Factor, bool]:
    """The calibrated utilisation of a GPU architecture, and whether it is that architecture's own (False: no
    calibration row; the lowest fitted share of its stand-ins stands in: TRAINING_UTILIZATION_UNCALIBRATED_CDNA for
    an AMD Instinct part, TRAINING_UTILIZATION_UNCALIBRATED otherwise). ``capability``: the part's CUDA compute
    capability (major x 10 + minor, estimate/device.py cuda_capability); where the architecture's rows cover only
    some capabilities (CALIBRATED_CAPABILITIES), another one is uncalibrated (None: the architecture's own)."""
    f = TRAINING_UTILIZATION_BY_ARCH.get(architecture)
    scope = CALIBRATED_CAPABILITIES.get(architecture)
    if f is not None and (scope is None or capability is None or capability in scope):
        return f, True
    cdna = stand_in_architectures(architecture) == UNCALIBRATED_STAND_INS["cdna"]
    return (TRAINING_UTILIZATION_UNCALIBRATED_CDNA if cdna else TRAINING_UTILIZATION_UNCALIBRATED), False
# GeForce RTX 40-series cards have no peer-to-peer access (NVIDIA/nccl#1127: "It is for sure that 4090 does not
# support it"); NCCL then stages every transfer through host memory, a path the devices share (eq. 7). Its
# bandwidth is CALIBRATED on one named row: torchtune Llama2-7B LoRA FSDP on 2 x RTX 4090, 2768 tokens/s (PM0022),
# with TRAINING_DEVICE_UTILIZATION for the compute -> 4.546 GB/s (4.555 GB/s when the whole step's communication
# overlapped its whole compute; 4.633 GB/s when the forward all-gather overlapped only the forward,
# formulas/training_time.py eq. (8'), and the collectives carried the bf16 base alone both ways; since they carry
# the FSDP units the memory gathers, the adapters with their block and the root unit kept for the backward,
# estimate/training/gather_units.py fsdp_collective_volume); re-derived by tests/hardware/test_training_calibration.py. Which devices lack it is data: a device's
# ``peer_to_peer`` field (the catalog's rtx-4090 row: false, NVIDIA/nccl#1127), read by estimate/device.py peer_to_peer.
HOST_STAGED_COLLECTIVE_BANDWIDTH = Factor(
    "host_staged_collective_bandwidth", 4.546e9, 4.546e9, 4.546e9,
    "calibrated: torchtune Llama2-7B LoRA FSDP 2 x RTX 4090 2768 tokens/s (PM0022); bytes/s shared by all devices")
# Host seconds per launched kernel of an eager training step (formulas/launch_overhead.py eq. K1: the micro-step
# takes max(device time, kernels x tau)). CALIBRATED on one named row, PM0720 (Qwen-7B LoRA r64 on every linear,
# HF Trainer + PEFT, 1 x A100-SXM4-80G, 8 x 256 tokens in 1.2 s per step, Qwen README): the only published row whose
# micro-step (0.149 s) is longer than its device work (about 0.07 s), so tau = the measured micro-step (less the
# step's optimizer and accumulation share) / its kernels: (1.2 s - optimizer - 7 accumulations) / 8 = 0.1488 s over
# the 6,941 kernels of the model its remote code runs (validation_cases.py qwen7b_spec: one split c_attn GEMM and 5
# adapters a layer, eqs. K2/K3 with LayerCode; K2' reentrant; K6a, PEFT's fp32 adapters under the Trainer's bf16
# autocast; K7, its lora_dropout 0.05; flash-attn's Triton rotary and, ASSUMED, its fused RMSNorm), with the step's
# optimizer run as HF Trainer ran it (foreach AdamW: transformers 4.32.0 under PyTorch 2.0, validation_cases.py
# QWEN_ADAMW) = 21.35 us (21.43 us with the estimate's default optimizer before the row stated it; 17.06 / 17.12 us
# for the low end). Before: 19.72 us over 7,537 kernels and 14.54 us over 10,225 (K6a's casts added), both counting the qwen2 layout
# of q/k/v as three GEMMs with 7 adapters and transformers' eager rotary and norms; with eager RMSNorms (the fused
# one not built) the count is 8,689 and tau 17.06 us. Re-derived by tests/hardware/test_training_calibration.py;
# PM0720 is left out of the error summary. For scale: Holistic Trace Analysis measures the cudaLaunchKernel call
# alone at 5-20 us (facebookresearch/HolisticTraceAnalysis docs/source/features/cuda_kernel_launch_stats.rst); tau
# adds the Python call, autograd and dispatch of each op (PyTorch 2.0, HF Trainer, PEFT). One row; its low end is the
# same row counted with eager RMSNorms (17.1 us: the fused norm's build is the one assumption the row cannot show --
# Qwen's README lists csrc/layer_norm as optional and the Docker image that builds it is seven weeks younger than the
# table, validation_cases.py QWEN7B_NORM_KERNEL), re-derived by the same test; the high end is the expected value.
# Which rows pass only under the assumption: validation_cases.py's KNOWN_MISSES comment names them.
HOST_SECONDS_PER_KERNEL = Factor(
    "host_seconds_per_kernel", 17.06e-6, 21.35e-6, 21.35e-6,
    "calibrated: Qwen-7B LoRA 1 x A100 seq 256, 1.2 s per 8 x 256 tokens (PM0720, Qwen README @2df8e8a), Qwen-7B's "
    "own kernels with flash-attn's fused RMSNorm assumed (low end: eager norms); "
    "cudaLaunchKernel alone 5-20 us (HolisticTraceAnalysis cuda_kernel_launch_stats)")
# vLLM's V0 engine (vLLM main of Dec 2023 - Apr 2024, the releases of validation/vllm_benchmark_latency.csv) ran
# scheduling, input preparation, sampling and output processing on the host between decode steps while the GPU
# waited: vLLM's v0.6.0 post (blog.vllm.ai 2024-09-05) measured "29% of the total execution time ... spent on
# scheduling" beside 38% of GPU execution for Llama 3 8B on one H100, and v0.6.0 overlapped it (multi-step scheduling,
# asynchronous output processing). Seconds per decode step, added to the step (eq. 7's fixed term) for releases
# before 0.6 by estimate/engines.py STEP_HOST, the rule fit and the validation rows share.
# CALIBRATED on one named row, VB07 (Mixtral-8x7B TP2 on A100-SXM4-80GB, one sequence, 1000 + 50 tokens, 0.762 s,
# vLLM PR #3240): the row with the least device work per step; (measured - predicted) / 49 decode steps, the device
# step at SERVING_DECODE_BANDWIDTH (fitted first, on rows with no host term; 6.548 ms at the former 0.8, 4.876 ms at
# the four-row share 0.703 of sessions 9-10) with its TP2
# all-reduces' latency (65 x CUSTOM_ALLREDUCE_LATENCY, estimate/engines.py tp_allreduce; 5.464 ms without it) and their
# bytes at NVLink's eq.-(12) bandwidth (formulas/network.py; 5.207 ms at the 300 GB/s line rate, 5.197 ms at 240),
# and the fused-MoE kernel's time beyond its bytes (formulas/speed.py eq. 16: 32 layers x (27.5 us + 2 experts x
# 0.345 us) = 0.90 ms a step; 5.197 ms without it).
# Re-derived by tests/validation/test_vllm_static_batch.py; VB07 is left out of the summary, VB01-VB06 and VB08-VB13
# are held out.
VLLM_V0_STEP_SECONDS = Factor(
    "vllm_v0_engine_step_seconds", 4.294e-3, 4.294e-3, 4.294e-3,
    "calibrated: vLLM PR #3240 benchmark_latency Mixtral-8x7B TP2 A100 b1 p1000 g50, 0.762 s (VB07); the V0 engine's "
    "host time between steps (vLLM v0.6.0 post, 2024-09-05: scheduling 29% of execution)")
# vLLM 0.6-0.7 (V0 engine after the v0.6.0 performance work: asynchronous output processing, blog.vllm.ai 2024-09-05)
# still schedules, prepares inputs and samples between decode steps: EngineArgs ``num_scheduler_steps: int = 1`` (vllm
# 0.6.x vllm/engine/arg_utils.py; multi-step scheduling is opt-in), so one scheduler call per forward step and the
# device waits for it. Seconds per decode step, added to the step (eq. 7's fixed term) for releases 0.6-0.7 by
# estimate/engines.py STEP_HOST. CALIBRATED on one named row, QV01 (vLLM 0.6.3, Qwen2.5-0.5B-Instruct on one A100
# 80GB, one sequence, a 1-token prompt, 2048 generated tokens, 311.55 tokens/s; the Qwen2.5 speed benchmark page): the
# row with the least device work per step (0.67 ms predicted against 3.21 ms measured); (measured - predicted without
# it) / 2047 decode steps, the device step at SERVING_DECODE_BANDWIDTH (fitted first; 2.598 ms at the former 0.8,
# 2.513 ms at the four-row share 0.703).
# Re-derived by tests/validation/test_engine_speed_rows.py; QV01 is left out of the summary,
# the other single-GPU rows of the page (Qwen2.5 0.5B-14B, 1-63488-token prompts) are held out. One row, no spread
# claimed (low = expected = high).
VLLM_V06_STEP_SECONDS = Factor(
    "vllm_v06_engine_step_seconds", 2.539e-3, 2.539e-3, 2.539e-3,
    "calibrated: Qwen2.5 speed benchmark (QwenLM/Qwen2.5 docs @a912d23), vLLM 0.6.3 Qwen2.5-0.5B-Instruct 1 x A100 "
    "80GB, 1 + 2048 tokens, 311.55 tokens/s (QV01); V0 with num_scheduler_steps = 1 schedules between steps")
# vLLM's V1 engine with asynchronous scheduling (the default since vLLM 0.14.0: vllm/config/scheduler.py:133
# ``async_scheduling = Field(default=None)``, resolved to True in vllm/config/vllm.py:588-628; 0.13.0 still had
# ``async_scheduling: bool = False``) schedules step n + 1 while the device runs step n (vllm/v1/engine/core.py
# step_with_batch_queue, batch queue of max_concurrent_batches = 2, vllm/v1/executor/uniproc_executor.py:59-60;
# vLLM 0.19.1 core.py:185, 421): a decode step takes max(device step, host step) (formulas/speed.py eq. 14). The host
# step (scheduling, input preparation, sampling and output processing of one step) is CALIBRATED on one named row,
# VS07 (vLLM 0.19.0, Qwen3-0.6B on one H100 SXM, 512 + 128 tokens at 16 requests/s: 2.39 ms per output token, where
# the device step is 0.57 ms, so the host bounds it): host step = the measured time per token. Re-derived by
# tests/validation/test_vllm_serving.py; VS07 is left out of the summary. Every other current-vLLM row
# (validation/vllm_serving_tpot.csv) has a device step above it, so nothing held out tests the value: one row, no
# spread claimed (low = expected = high). It is per step, not per sequence: the host work that grows with the
# batch is not modelled.
VLLM_V1_HOST_STEP_SECONDS = Factor(
    "vllm_v1_host_seconds_per_step", 2.39e-3, 2.39e-3, 2.39e-3,
    "calibrated: vLLM 0.19.0 Qwen3-0.6B 1 x H100 512+128 tokens at 16 req/s, 2.39 ms per output token (VS07, "
    "kvcached benchmarks/bench_layout/H100_results.md); async scheduling overlaps it with the device step")
# vLLM's OpenAI server's own time per request (formulas/serving_queue.py eq. Q9's H): what a streamed request's TTFT
# holds beyond the device -- HTTP parsing, tokenizing the prompt and handing it to the engine core, the first token's
# trip back through AsyncLLM's output handler (detokenizing) and the SSE chunk -- in the server's one Python process
# (vllm/v1/engine/async_llm.py @8ef0b5f5 generate / output_handler). CALIBRATED on one named row, SL01
# (validation/serving_load.csv: vLLM 0.23.0, Qwen2.5-0.5B-Instruct on one L4, one request at a time, 256-token
# prompts, median TTFT 27.0 ms): H = measured TTFT - the idle prompt's prefill (4.53 ms predicted; one request finds
# the engine idle, no step to wait for). Re-derived by tests/validation/test_serving_load_rows.py; SL01 is left out
# of the summary and the other rows (L4 at 2-32 requests, Mistral-7B on an RTX 4090 at 4-48) test it. Applied from
# one request on (estimate/serving_load.py): a lone request's TTFT is the idle prefill plus H; at C requests it is a
# queueing station of its own (the server's one process, formulas/serving_queue.py eq. Q6'). One row, one host CPU:
# the expected value is SL01's; low .. high is a STATED range, not a calibrated one -- low 0 (a host or a server whose
# per-request work vanishes beside the device) .. high 2 x SL01 (a slower host CPU, a longer prompt to tokenize) --
# named in the prefill_under_load assumption. The default for every HTTP-serving engine (estimate/engines.py
# API_SERVER_SECONDS). What H does not cover: the server's work per output token (detokenizing, one SSE chunk per
# token) and per step, which is why one request's requests/s (SL02, the same run) is still 27 % above the measured.
# Not one constant across releases, endpoints and models (issue #12; not modelled, no input names what it needs):
# vLLM 0.11.0's /v1/chat/completions re-parses the model's Jinja chat template on every request, on the server's
# event loop (entrypoints/openai/serving_engine.py:791 apply_hf_chat_template -> entrypoints/chat_utils.py:1627
# resolve_chat_template_kwargs, 1575-1599: a new sandboxed Environment, env.parse, find_undeclared_variables; no
# cache), except for gpt-oss, whose prompt harmony renders in Rust (serving_chat.py:146, 260, 1564-1590); vLLM 0.19.1
# caches that parse (renderers/hf.py:372-383, 429); SGLang 0.5.5.post1 detects the template's format once at start
# (managers/template_manager.py:126) and renders a compiled, cached template (its pinned transformers 4.57.1,
# utils/chat_template_utils.py:392 lru_cache _compile_jinja_template).
# Parsing Qwen3's 4.1 KB template with the same calls takes 12-13 ms (min of 200) on a shared Xeon, rendering it
# 0.03 ms. The short chat bursts agree (1000 requests of 128 in / 4 out at once, one H100): vLLM 0.11 Qwen3-14B 44.0
# req/s (22.7 ms each, SL42), vLLM 0.11 gpt-oss-20b 213 (4.7 ms, SL48), SGLang Qwen3-14B-FP8 128 (7.8 ms, SL52). SL01
# and SL23 use the completions endpoint (no template); the host CPU's speed, which scales all of it, no row names.
VLLM_API_SERVER_SECONDS = Factor(
    "vllm_api_server_seconds_per_request", 0.0, 22.47e-3, 2 * 22.47e-3,
    "calibrated (expected): vLLM 0.23.0 Qwen2.5-0.5B-Instruct 1 x L4, one request, 256 + 128 tokens, median TTFT "
    "27.0 ms (SL01, ai.wmx.dev/benchmarks serving/raw-vllm concurrency sweep) less the 4.53 ms prefill; stated "
    "range 0 .. 2 x SL01, not calibrated")
# The share s of the server's time per request H done one request after another in its one process
# (formulas/serving_queue.py eq. Q11: s H queues, (1 - s) H is each request's own delay). STATED, not calibrated:
# expected 1, all of H serial (eqs. Q6', Q9b, Q10 as first written). The one row that isolates the serial part, SL23
# (validation/serving_load.csv: vLLM 0.19.0, Qwen3-0.6B on one H100, 500 requests of 512 + 128 tokens sent at once,
# 92.59 requests/s, seed 42; ovg-project/kvcached benchmarks/bench_layout sweep_results/A_vanilla_inf.seed42.json),
# gives s = 0.480 (eq. Q6' at 500 requests: the server's station binds; tests/validation/test_serving_load_rows.py
# re-derives it), but at 0.480 the held-out rows get worse: serving TTFT under load median / p90 |error| 27.0 % /
# 118.3 % -> 31.1 % / 65.7 % (L4 SL09 -48.3 -> -63.8 %, SL11 -14.1 -> -68.6 %, SR01 +0.9 -> -25.7 %, SL24 +223 ->
# +20.3 %) and requests/s without SL23 19.8 % / 24.9 % -> 22.1 % / 29.0 % (L4 SL04-SL12 +11..+23 -> +11..+31 %).
# The L4 host's sweep needs a serial demand near all of its 22.5 ms (32 requests: 29.5 requests/s, the server's queue
# gives its TTFT), the H100 host's burst at most 1 / 92.6 = 10.8 ms of a larger one-request latency (SR01: ~35 ms
# beside a ~3 ms prefill): the split is the host CPU's and the release's, which no input names. Range: 0 .. 1, with
# SL23's 0.480 inside it.
VLLM_API_SERVER_SERIAL_SHARE = Factor(
    "vllm_api_server_serial_share", 0.0, 1.0, 1.0,
    "stated: all of H serial; SL23 (vLLM 0.19.0 Qwen3-0.6B 1 x H100, 500 requests of 512 + 128 tokens at once, 92.59 "
    "requests/s, ovg-project/kvcached benchmarks/bench_layout A_vanilla_inf.seed42.json) alone gives 0.480, which "
    "makes the held-out L4 sweep and SR01 worse; range 0 .. 1")
# Latency (alpha of formulas/speed.py eq. 6) of ONE all-reduce of a decode step's activations (b x hidden x 2 B: 2-64
# KB at b = 1-4), per kernel the serving engine picks (estimate/engines.py ``tp_allreduce``). Published measurements,
# not fitted; the message sizes bracket a decode step's (4-32 KB). Neither is an A100 figure: these are the closest
# published small-message timings of the same kernels, so each spans its source's table (low..high).
# vLLM's custom all-reduce kernel (csrc/custom_all_reduce.cuh, the one SGLang copies): SGLang PR #2904 (sgl-project/
# sglang, 2025-01-15, 'unit test performance in H100 (without cuda graph)'), vLLM's kernel at tp 2/4/8: 4096 B
# 0.0088/0.0085/0.0093 ms, 32768 B 0.0087/0.0092/0.0118 ms. Expected: the tp = 4 mean over 4-32 KB. Measured outside
# CUDA graphs (a copy into the registered buffer and a launch per call): the case of vLLM 0.6's decode beyond
# max_seq_len_to_capture = 8192 tokens of context (vllm 0.6.3 engine/arg_utils.py:126; worker/model_runner.py:717-726
# _use_captured_graph: eager above it); inside a captured graph both fall away, so there it is the high side. Checked
# against vLLM PR #2192's end-to-end saving (tests/estimate/test_tp_allreduce.py: 43.8 us per all-reduce at 1 MiB lies
# between the expected latencies' difference and the widest).
CUSTOM_ALLREDUCE_LATENCY = Factor(
    "custom_allreduce_latency_seconds", 8.5e-6, 8.85e-6, 11.8e-6,
    "SGLang PR #2904 (2025-01-15): vLLM's custom all-reduce on H100, 4-32 KB, tp 2/4/8, 8.5-11.8 us (tp 4: 8.5 / "
    "9.2 us), without CUDA graphs")
# NCCL over PCIe across two islands (two CPU sockets / PCIe roots, four GPUs under each, joined through the CPUs):
# vllm-project/vllm issue #50576 (2026-08-04), NCCL on 8 x A800 PCIe (2 x 4 PCIe islands: GPU0-3 and GPU4-7, the
# layout its author's vllm PR #50941 describes), bf16: 8 KB 56.9 us, 16 KB 63.8 us, 32 KB 95.8 us. Expected: 16 KB,
# the message the figures below are read at; low 8 KB, high 32 KB. The one home of that table: the NVLink and
# one-switch figures below take its 16 KB figure as their high end, LLAMACPP_ROW_EXCHANGE too.
NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS = Factor(
    "nccl_allreduce_latency_pcie_islands_seconds", 56.9e-6, 63.8e-6, 95.8e-6,
    "vllm issue #50576: NCCL on 8 x A800 PCIe over two PCIe islands (2 x 4), bf16, 8 / 16 / 32 KB 56.9 / 63.8 / "
    "95.8 us")
# NCCL (torch.distributed / pynccl all_reduce) of a small message inside one machine: ByteDance-Seed/Triton-distributed
# issue #57 (2025-07-14), torch all_reduce on 8 x H100 (NVLink): 128 B 19.19 us, 16 KB 20.71 us, 32 KB 22.65 us;
# high: NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS' 16 KB (PCIe and a second island).
NCCL_ALLREDUCE_LATENCY = Factor(
    "nccl_allreduce_latency_seconds", 19.19e-6, 20.71e-6, NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS.expected,
    "Triton-distributed issue #57: torch/NCCL all_reduce on 8 x H100, 128 B-32 KB, 19.2-22.7 us (16 KB 20.7 us); "
    "vllm issue #50576: NCCL on 8 x A800 PCIe, 16 KB 63.8 us")
# NCCL over PCIe behind one switch (no full mesh: estimate/device.py nvlink_mesh_for; with or without peer access;
# up to engines.PCIE_ONE_SWITCH_GPUS GPUs, more cross a second island: NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS), the path
# vLLM / SGLang take for more than two PCIe-only GPUs or GPUs without peer-to-peer access (engines.tp_allreduce):
# haohervchb/sglang-V100 PR #2 (2026-09-12), NCCL all-reduce captured in a CUDA graph (the decode step's case) on 4 x
# V100 behind one PCIe switch (PXB), fp16: 4 KB 19.4 us, 8 KB 20.3, 16 KB 22.3, 32 KB 24.2 us. Expected: 16 KB, the
# message the NVLink figure above is read at; low 4 KB; high NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS' 16 KB (a second
# island crossed). Stand-in for a pair without peer access (NCCL's shared-memory transport through host memory), which
# no source times in a CUDA graph: nccl-tests alltoall_perf (not an all-reduce, not in a graph) on 2 x RTX 4090 with
# P2P disabled gives 11.3-11.9 us at 8-64 B (tinygrad/open-gpu-kernel-modules issue #17), below this row.
NCCL_ALLREDUCE_LATENCY_PCIE = Factor(
    "nccl_allreduce_latency_pcie_seconds", 19.4e-6, 22.3e-6, NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS.expected,
    "haohervchb/sglang-V100 PR #2: NCCL all-reduce in a CUDA graph on 4 x V100 over one PCIe switch, 4-32 KB "
    "19.4-24.2 us (16 KB 22.3 us); high: vllm issue #50576, NCCL on 8 x A800 PCIe (two islands), 16 KB 63.8 us")
# The device time of one decoder layer of an MLA + routed-expert model (DeepSeek V3 / R1 / V3.2, Kimi K2, ...) in a
# serving engine's CUDA-graph decode step at small batch: formulas/speed.py eq. (15)'s tau_k, the roof of the layer's
# chain of latency-bound kernels (MLA's down- and up-projections, norms, RoPE, the absorbed W_UK / W_UV products, the
# latent attention, the router and its top-k, the fused-MoE kernels with their alignment and activation, the shared
# expert, the fp8 activation quantizations between them), each at its minimum duration whatever its few bytes. No
# published count of that chain's kernels and their durations in hand, so CALIBRATED on one named row, MD01
# (validation/moe_multigpu_decode.csv: SGLang 0.5.7, DeepSeek-R1-0528 FP8, TP 8 on 8 x H200, 8 sequences, 12.8 ms per
# output token, every setting stated): (measured step - the step's all-reduces, 123 x the custom kernel's latency +
# bytes, estimate/engines.py tp_allreduce) / 61 layers; the weight and K/V read of that step (6.09 ms at the serving
# share) lies under the roof. Left out of the summary; MD02-MD04 (one sequence, other engines, releases, GPUs) are
# held out. One row, no spread claimed (low = expected = high). For scale: 188 us a layer is about 70 kernels at the
# 2.7 us a kernel of gLLM PR #264's launch-bound DeepSeek-V4 decode (8412 kernels, 22.7 ms of GPU time).
# Re-derived by tests/validation/test_moe_multigpu_rows.py.
MLA_MOE_LAYER_KERNEL_SECONDS = Factor(
    "mla_moe_layer_kernel_seconds", 187.6e-6, 187.6e-6, 187.6e-6,
    "calibrated: InferenceX issue #870, SGLang 0.5.7 DeepSeek-R1-0528 FP8 TP8 8 x H200, concurrency 8, 12.8 ms mean "
    "TPOT (MD01): (step - all-reduces) / 61 layers")
# The serving engines' fused-MoE kernel (vLLM / SGLang ``fused_experts``, Triton fused_moe_kernel) in a decode step:
# formulas/speed.py eq. (16)'s stream share s_e, fixed time per call t_call and per touched expert t_e. FITTED (least
# squares, t = t_call + B_e / (B s_e) + n_e t_e, B the catalog's datasheet bandwidth, n_e eq. 5 at the benchmark's
# random routing) on the six published kernel times of validation/fused_moe_kernel_times.csv (FK01-FK06: SGLang PR
# #11730 Qwen3-235B-A22B fp8 TP 8 on H200, vLLM PR #24700 Qwen3-30B-A3B fp8 and Mixtral-8x7B bf16 TP 2 on H100, at 1
# and 32 tokens); each row is reproduced within 9 % (FK01: 34.6 us fitted against 31.7 us). Kernel benchmarks, not
# validation rows: no serving row is fitted. One fit, no spread claimed (low = expected = high). For scale:
# Mixtral's 8 large experts stream at 0.92 of the datasheet; Qwen3-30B-A3B's 112 touched experts of 4.7 MB at 32
# tokens add 39 us to their 171 us stream. A decode step takes t_call and t_e only (estimate/speed_decode.py
# fused_moe_step): its expert bytes stay at the step's own bandwidth share, so s_e is the fit's, not the step's. The
# benchmarks repeat one routing, so at 1 token the few touched experts (19-38 MB) may stay in the 50 MB L2: those
# rows time the fixed terms (their bytes term is 4-11 us of 32-45). Re-derived by
# tests/estimate/test_fused_moe_kernel.py.
FUSED_MOE_STREAM_SHARE = Factor(
    "fused_moe_stream_share", 0.919, 0.919, 0.919,
    "fitted: vLLM PR #24700 (H100, Qwen3-30B-A3B fp8, Mixtral bf16) and SGLang PR #11730 (H200, Qwen3-235B fp8) "
    "fused_moe kernel times at 1 and 32 tokens (validation/fused_moe_kernel_times.csv FK01-FK06)")
FUSED_MOE_CALL_SECONDS = Factor(
    "fused_moe_call_seconds", 27.5e-6, 27.5e-6, 27.5e-6,
    "fitted with FUSED_MOE_STREAM_SHARE on FK01-FK06: the fixed device time of one fused_moe call")
FUSED_MOE_EXPERT_SECONDS = Factor(
    "fused_moe_expert_seconds", 0.345e-6, 0.345e-6, 0.345e-6,
    "fitted with FUSED_MOE_STREAM_SHARE on FK01-FK06: the device time of each touched expert beyond its bytes")
# The serving engines' chunked Gated DeltaNet prefill (vLLM / SGLang: flash-linear-attention's Triton
# chunk_gated_delta_rule, copied into vllm/model_executor/layers/fla/ops/chunk.py chunk_gated_delta_rule_fwd L42-84
# @044990c1: chunk_local_cumsum at chunk_size=64 (L53), kkt, solve_tril, recompute_w_u, the state scan
# chunk_gated_delta_rule_fwd_h (L67: one program per head and value block walks the chunks in order), chunk_fwd_o):
# formulas/speed.py eq. (17)'s time per layer call t_g and per chunk of the longest sequence t_ch. FITTED (least
# squares, t = t_g + t_ch ceil(T / 64)) on GK01-GK03 of validation/gdn_chunk_kernel_times.csv (vLLM PR #38981's
# published B200 times at Qwen3.5-397B-A17B's TP 8 shapes, 8 value heads per GPU, one sequence of 2048 / 4096 / 8192
# tokens; each reproduced within 1 %); GK04-GK10 held out (several sequences in one call, 16 heads per GPU): within
# 20 %, all but two within 12 %, the model low on each (tests/estimate/test_gdn_chunk_kernel.py re-derives both).
# Kernel benchmarks, not serving rows: no TTFT is fitted. One fit, no spread claimed. The times are the call
# measured alone (its eight Triton launches included): in a forward pass part of t_g may hide under the previous
# layer's kernels; and B200 only: no published row times another GPU, so every GPU takes these figures (named in the
# estimate's assumption).
GDN_CHUNK_TOKENS = 64  # vLLM fla/ops/chunk.py L53 @044990c1 (chunk_local_cumsum(g, chunk_size=64))
GDN_CHUNK_CALL_SECONDS = Factor(
    "gdn_chunk_call_seconds", 130.5e-6, 130.5e-6, 130.5e-6,
    "fitted: vLLM PR #38981 chunk_gated_delta_rule_fwd times on B200, Qwen3.5 TP 8 shapes, one sequence of "
    "2048-8192 tokens (validation/gdn_chunk_kernel_times.csv GK01-GK03): the fixed time of one layer's call")
GDN_CHUNK_STEP_SECONDS = Factor(
    "gdn_chunk_step_seconds", 1.984e-6, 1.984e-6, 1.984e-6,
    "fitted with GDN_CHUNK_CALL_SECONDS on GK01-GK03: the time per 64-token chunk of the longest sequence (the state "
    "scan walks the chunks in order)")
# the value heads per GPU of the fit's rows (GK01-GK03) and the most the fit is taken to cover: GK10 at 16 heads per
# GPU is held out and 19 % above the fit (tests/estimate/test_gdn_chunk_kernel.py); past it eq. (17), which has no
# head term, is stated as an extrapolation (estimate/speed_layout.py gdn_prefill_seconds)
GDN_CHUNK_FIT_HEADS = 8
GDN_CHUNK_HEADS_CHECKED = 16
# the weight formats whose routed experts those kernels run (fp16 / bf16 and fp8 weights, per-tensor or block-wise);
# other formats (MXFP4, NVFP4, AWQ / GPTQ int4, GGUF) run other MoE kernels no row here times
FUSED_MOE_FORMATS = ("bf16", "fp16", "fp8", "fp8-block")


# llama.cpp -sm row (formulas/speed.py eq. 8r): the latency of one synchronised exchange between the main GPU and the
# others per split matmul (an event recorded, waited on by the other stream, a small peer copy: the input to each GPU,
# or its output slice back), two per matmul. No published timing of llama.cpp's row-split exchange is in hand: the
# closest published timings of one small cross-GPU exchange with a synchronisation, the same sources as the
# all-reduce latencies above: vLLM's custom all-reduce (peer memory + flag barrier, SGLang PR #2904, H100, 4-32 KB:
# 8.5 / 8.85 us) as low and expected, and NCCL on PCIe (vllm issue #50576, A800 PCIe, 16 KB: 63.8 us) as high,
# consumer cards without peer access copying through host memory. A named parameter, not fitted to any case.
LLAMACPP_ROW_EXCHANGE = Factor(
    "llamacpp_row_split_exchange_seconds", CUSTOM_ALLREDUCE_LATENCY.low, CUSTOM_ALLREDUCE_LATENCY.expected,
    NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS.expected,
    "closest published small cross-GPU exchange: SGLang PR #2904 custom all-reduce H100 4-32 KB 8.5-8.85 us; vllm "
    "issue #50576 NCCL A800 PCIe 16 KB 63.8 us (high)")
# The host link of a device whose catalog row states no PCIe generation (a user's hardware file, a generic `gpu`):
# PCIe Gen4 x16, 32 GB/s per direction (the catalog's pcie4 interconnect). Every other device's link is its own
# (estimate/device.py host_link: its host_interconnect (NVLink-C2C on a Grace superchip), else its PCIe interconnect,
# else its `pcie` generation's x16 link).
HOST_LINK_BANDWIDTH = 32e9
HOST_LINK_SOURCE = "PCIe Gen4 x16 per direction (interconnects.json pcie4, llm-analysis)"

# Training with the states offloaded to host memory (FSDP2 CPUOffloadPolicy, DeepSpeed ZeRO-Offload) steps the
# optimizer over host DRAM (formulas/cpu_offload_time.py eq. (H4)), whose bandwidth the training settings do not
# name: the host of an 8-GPU server. Expected: the DGX A100's two AMD EPYC 7742 (Rome; NVIDIA DGX A100 system
# architecture, developer.nvidia.com/blog/defining-ai-innovation-with-dgx-a100; "2x AMD Epyc Rome 7742 CPUs",
# hardwaretimes.com DGX A100 article), 8 channels of DDR4-3200 each: 2 x 204.8 GB/s (catalog cpus.json
# amd-epyc-milan, alias epyc-rome). Low: one such socket; high: two 8-channel DDR5-4800 sockets (2 x 307.2 GB/s,
# cpus.json intel-xeon-spr-8ch, the DGX H100's Sapphire Rapids). Reached at MEMORY_BOUND_BANDWIDTH_CPU.
OFFLOAD_HOST_MEMORY_BANDWIDTH = Factor(
    "offload_host_memory_bandwidth", 204.8e9, 409.6e9, 614.4e9,
    "host DRAM of an 8-GPU server (not given): DGX A100, 2 x AMD EPYC 7742 with 8 x DDR4-3200 each = 2 x 204.8 GB/s "
    "(cpus.json amd-epyc-milan / epyc-rome; NVIDIA DGX A100 architecture blog); range one Rome socket .. two "
    "8-channel DDR5-4800 sockets")

# An Apple GPU may use Metal's recommendedMaxWorkingSetSize of the unified memory: llama.cpp's Metal device reports
# it as the device's total (its free = it - currentAllocatedSize) and warns past it ("current allocated size is greater
# than the recommended max working set size"); allocations beyond it fail or page. ggml-metal logs it at init, in
# MiB labelled "MB" until 2023 (ggml-metal.m: recommendedMaxWorkingSetSize / 1024.0 / 1024.0) and in 10^6 bytes
# since (recommendedMaxWorkingSetSize / 1e6). The published logs (APPLE_WORKING_SET_LOGS, each re-derived by
# tests/hardware/test_apple_working_set.py) give 2/3 of the memory on Macs of 16 and 32 GB and 3/4 on Macs of 64 and
# 96 GB. Between 32 and 64 GB the threshold is set above 32 GB: two logs in the public index without a stable address
# (an M4 Max, 36 GB: 28991.03 MB; a 48 GB Mac: 38654.71 MB, both 10^6-byte) read 3/4. Newer macOS releases report more on some sizes (0.78 on 32 and 36 GB, 0.84 on 128 GB,
# macOS 26): kept as the observed high, not the expected share, so a fit never counts on them.
APPLE_WORKING_SET_SMALL = 2 / 3
APPLE_WORKING_SET_LARGE = 3 / 4
APPLE_WORKING_SET_SMALL_UPTO = 32 * 2**30  # the largest memory logged at 2/3 (32 GB)
APPLE_WORKING_SET_NEWER_MACOS_HIGH = 0.84  # M5 Max 128 GB, macOS 26 (antirez/ds4 PR #893: 107.52 GiB)


@dataclass(frozen=True)
class MetalWorkingSetLog:
    """One published ``recommendedMaxWorkingSetSize`` log line: the Mac's unified memory [GiB], the figure printed,
    the unit it was printed in (bytes per "MB": 2**20 before 2023's change, 10**6 after), the chip and where."""
    memory_gib: int
    figure_mb: float
    unit: int
    chip: str
    source: str
    newer_macos: bool = False  # a macOS release that raised the share above the classic rule (the observed high)


APPLE_WORKING_SET_LOGS: tuple[MetalWorkingSetLog, ...] = (
    MetalWorkingSetLog(16, 10922.67, 2**20, "M1 (MacBook Pro 16 GB)",
                       "github.com/abetlen/llama-cpp-python/issues/687"),
    MetalWorkingSetLog(16, 10922.67, 2**20, "M1 (MacBook Air 16 GB)", "github.com/ise-uiuc/magicoder/issues/19"),
    MetalWorkingSetLog(16, 11453.25, 10**6, "M4 (ggml-org CI runner ggml-100-mac-m4)",
                       "github.com/ggml-org/ci llama.cpp/667d72846c06b2cf4f7c8a4265e210991a49706b/ggml-100-mac-m4/"
                       "README.md"),
    MetalWorkingSetLog(32, 21845.34, 2**20, "M2 Max 32 GB", "github.com/ollama/ollama/issues/434"),
    MetalWorkingSetLog(32, 21845.34, 2**20, "M1 Max 32 GB", "github.com/ggml-org/llama.cpp/pull/2011"),
    MetalWorkingSetLog(64, 49152.00, 2**20, "M1 Max 64 GB", "github.com/ggml-org/llama.cpp/issues/1870"),
    MetalWorkingSetLog(96, 73728.00, 2**20, "M2 Max 96 GB", "github.com/ggml-org/llama.cpp/issues/3213"),
    MetalWorkingSetLog(128, 107.52 * 1024, 2**20, "M5 Max 128 GB, macOS 26 (printed 107.52 GiB)",
                       "github.com/antirez/ds4/pull/893", newer_macos=True),
)
APPLE_WORKING_SET_NAME = "apple_gpu_working_set"
APPLE_WORKING_SET_SOURCE = (
    "Metal recommendedMaxWorkingSetSize as llama.cpp logs it: 2/3 of unified memory up to 32 GB (M1 16 GB "
    "10922.67 MiB, llama-cpp-python #687; M2 Max 32 GB 21845.34 MiB, ollama #434), 3/4 above (M1 Max 64 GB "
    "49152 MiB, llama.cpp #1870; M2 Max 96 GB 73728 MiB, llama.cpp #3213; 36 and 48 GB read 3/4); macOS 26 "
    "reports up to 0.84 (M5 Max 128 GB, antirez/ds4 #893), not counted on")


def apple_gpu_working_set(unified_memory: int | float) -> float:
    """The share of an Apple chip's ``unified_memory`` [bytes] its GPU may use (Metal's recommendedMaxWorkingSetSize
    over the memory): 2/3 up to APPLE_WORKING_SET_SMALL_UPTO (32 GiB), 3/4 above, the rule the published logs in
    APPLE_WORKING_SET_LOGS follow (allowing 1 % for a memory given as 32 GB in 10^9 bytes or a driver's figure)."""
    return APPLE_WORKING_SET_SMALL if unified_memory <= APPLE_WORKING_SET_SMALL_UPTO * 1.01 else APPLE_WORKING_SET_LARGE


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

# How long a user waits for an answer before their attention leaves the dialogue: 10 s, the third of the three
# response-time limits of Nielsen, "Usability Engineering" (Academic Press 1993), sec. 5.5 "Response Times: The 3
# Important Limits" (after Miller 1968, "Response time in man-computer conversational transactions", AFIPS Fall
# Joint Computer Conference 33:267-277). Not a constraint: a search given no latency limit says when its choice keeps
# the user waiting longer for the first token (recommend.py ``slow_first_token_warning``).
ATTENTION_LIMIT_SECONDS = 10.0


def past_attention_limit(first_token_seconds: float | None) -> str | None:
    """The words every surface warns with (fit, plan, recommend) when a request's first token comes after
    ATTENTION_LIMIT_SECONDS: 'answers a request's first token after 5.4 min, past the 10 s ... (Nielsen 1993, sec.
    5.5)'; None within it or without a TTFT."""
    if first_token_seconds is None or first_token_seconds <= ATTENTION_LIMIT_SECONDS:
        return None
    from ..units import format_seconds
    return (f"answers a request's first token after {format_seconds(first_token_seconds)}, past the "
            f"{ATTENTION_LIMIT_SECONDS:g} s a user's attention stays on a dialogue (Nielsen 1993, sec. 5.5)")


def decode_bandwidth_factor(device_kind: str, weights_format: str, engine: str | None = None) -> Factor:
    """The bandwidth factor for a device kind (gpu/apple/cpu...), weight format and serving engine (see the module
    constants): llama.cpp's for GGUF weights, SERVING_DECODE_BANDWIDTH for vLLM / SGLang on a GPU, else the
    AIConfigurator share."""
    if device_kind == "cpu":
        return DECODE_BANDWIDTH_CPU
    if weights_format.startswith("gguf:"):
        return LLAMACPP_DECODE_BANDWIDTH_APPLE if device_kind == "apple" else LLAMACPP_DECODE_BANDWIDTH
    if engine in SERVING_ENGINES and device_kind == "gpu":
        return SERVING_DECODE_BANDWIDTH
    return DECODE_BANDWIDTH_GPU


def llamacpp_stream_cap(weights_format: str, device_kind: str, vendor: str,
                        sm_cycles_per_second: float | None) -> float | None:
    """The bytes/s llama.cpp's decode mat-vec kernels stream on an NVIDIA GPU, N_SM f beta (formulas/speed.py eq.
    12, beta = LLAMACPP_STREAM_BYTES_PER_SM_CYCLE); None off NVIDIA GPUs, for non-GGUF weights, or when the
    catalog gives no SM count and FP32 lanes for the device (no cap is then applied)."""
    if llamacpp_gemm_path(weights_format, device_kind, vendor) is None or not sm_cycles_per_second:
        return None
    return sm_streaming_bandwidth(sm_cycles_per_second, LLAMACPP_STREAM_BYTES_PER_SM_CYCLE.expected)


def llamacpp_unfused_attention(weights_format: str, device_kind: str, vendor: str) -> tuple[Factor, str] | None:
    """The work factor w of eq. (13) (formulas/speed.py) and the catalog peak its kernels run at, for llama.cpp's
    single-token attention without flash attention: ('fp16_acc16') on NVIDIA GPUs (batched cuBLAS), ('fp16') on
    Apple GPUs (Metal mat-vec); None elsewhere (CPUs, other GPU vendors: no calibration row)."""
    if not weights_format.startswith("gguf:"):
        return None
    if llamacpp_gemm_path(weights_format, device_kind, vendor) is not None:
        return LLAMACPP_UNFUSED_ATTENTION_WORK_GPU, "fp16_acc16"
    if device_kind == "apple":
        return LLAMACPP_UNFUSED_ATTENTION_WORK_APPLE, "fp16"
    return None


def layer_kernel_floor(engine: str | None, device_kind: str, mla: bool, moe: bool) -> Factor | None:
    """The per-layer roof of latency-bound kernels (formulas/speed.py eq. 15) of a serving engine's (vLLM, SGLang)
    decode step on a GPU: MLA_MOE_LAYER_KERNEL_SECONDS for an MLA + mixture-of-experts model; None elsewhere (no
    published row measures another layer kind's chain, and dense layers' products hide theirs in the bandwidth
    share)."""
    if engine not in SERVING_ENGINES or device_kind != "gpu" or not (mla and moe):
        return None
    return MLA_MOE_LAYER_KERNEL_SECONDS


def fused_moe_kernel(engine: str | None, device_kind: str, weights_format: str, kernel_floor: float) -> bool:
    """Whether a decode step's routed experts are timed by formulas/speed.py eq. (16): a serving engine's (vLLM,
    SGLang) fused-MoE kernel on a GPU, weights of FUSED_MOE_FORMATS, and no eq. (15) roof (``kernel_floor`` 0: that
    roof's tau_k already holds the MLA + MoE layer's fused-MoE kernels)."""
    return engine in SERVING_ENGINES and device_kind == "gpu" and weights_format in FUSED_MOE_FORMATS \
        and not kernel_floor


def gdn_chunk_kernel(engine: str | None, device_kind: str, recurrent_kind: str | None) -> bool:
    """Whether a prefill's Gated DeltaNet layers are timed by formulas/speed.py eq. (17): a serving engine's (vLLM,
    SGLang: both run flash-linear-attention's Triton chunk kernels) prefill on a GPU of a ``gated_deltanet`` mixer."""
    return engine in SERVING_ENGINES and device_kind == "gpu" and recurrent_kind == "gated_deltanet"


def decode_layer_overhead(device_kind: str, weights_format: str) -> Factor | None:
    """The per-layer decode-step overhead (eq. 7) for llama.cpp (GGUF) on a GPU or Apple silicon; None elsewhere
    (CPU threads have no kernel launches; engines with CUDA graphs, e.g. vLLM, are covered by their bandwidth
    factor)."""
    if not weights_format.startswith("gguf:") or device_kind == "cpu":
        return None
    return LLAMACPP_LAYER_OVERHEAD_APPLE if device_kind == "apple" else LLAMACPP_LAYER_OVERHEAD_GPU
