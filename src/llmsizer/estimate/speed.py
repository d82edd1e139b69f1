"""Inference speed of a model on N x device: composes ``formulas/speed.py`` with the model's tensor inventory
and the device's sourced peaks. No arithmetic of its own beyond unpacking (every equation is in formulas/).

Per device under tensor parallelism t: weights/t (``shard_weights``), the KV share of ``kv_fraction_per_device``,
FLOPs/t, plus two all-reduces of the activations per layer over the interconnect (formulas/speed.py eq. 6); on
transformers the collectives its tensor-parallel plan runs instead (formulas/tensor_parallel.py
``transformers_plan_collectives``, eq. TP2).

Here: ``estimate_speed`` and ``speed_model``'s first stage (what no layout changes, into a ``SpeedSetup``), the
llama.cpp split-mode decode and prefill; ``speed_layout.py`` one layout's answer (``layout_speed``),
``speed_prefill.py`` its prefill pieces, ``speed_result.py`` the answer (``SpeedEstimate``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import MethodType
from typing import Any

from ..catalog.hardware import Device, Instance
from ..errors import InputError
from ..formulas import encoder_decoder_serving as ED
from ..formulas import hf_cache_traffic as HC
from ..formulas.dtypes import DTYPE_BYTES
from ..formulas.launch_overhead import BNB_SERVING_RELEASE, DECODE_LOOP_KERNELS, host_seconds
from ..formulas.launch_overhead import INFERENCE_SOURCE as LAUNCH_INFERENCE_SOURCE
from ..formulas.params import count_params
from ..formulas.speed import (
    PhaseTime,
    Roofline,
    moe_expert_fraction,
    row_split_decode_time,
    split_decode_time,
    split_prefill_time,
    step_overhead,
)
from ..formulas.vllm_mxfp4 import vllm_mxfp4_backend, vllm_mxfp4_padded_sizes, vllm_mxfp4_resident_extra
from ..formulas.weight_formats import (
    GROUP_SIZE_DEFAULT,
    OTHER_BYTES_DEFAULT,
    file_weight_bytes,
    normalize_format,
    weight_bytes,
)
from ..frozen import replace_fields
from ..inputs import short
from ..result import Assumption
from ..specs import ModelSpec
from . import efficiency as E
from . import engines as ENG
from .device import (
    TF32_DEFAULT_WHY,
    device_weights_capability,
    fp8_peak,
    fp8_tensor_cores,
    fp32_matmul_peak,
    numa_assumption,
    refuse_tensor_parallel_apart,
    resolve_target,
)
from .formats import engine_kernel_format, file_kernel_format, serving_fused_experts
from .speed_decode import transformers_step_kernels
from .speed_layout import layout_speed
from .speed_result import SpeedEstimate
from .speed_setup import MachineNetwork, SpeedSetup


def compute_dtype_for(fmt: str, device_kind: str, has_fp8: bool) -> str:
    """The matmul dtype a weight format runs at: fp8 weights on fp8-capable devices (``has_fp8``: estimate/device.py
    ``fp8_tensor_cores``; below compute capability 8.9 vLLM runs FP8 weight-only, FP8 Marlin, so 16-bit), fp32 on
    CPUs, else 16-bit (quantized integer/GGUF weights are dequantized to 16-bit for the matmul)."""
    if device_kind == "cpu":
        return "fp32"
    if fmt in ("fp8", "fp8-block") and has_fp8:
        return "fp8"
    if fmt in ("fp32", "gguf:f32"):
        return "fp32"
    if fmt in ("fp16", "gguf:f16"):
        return "fp16"
    return "bf16" if device_kind != "apple" else "fp16"


def attention_width(spec: ModelSpec) -> int:
    """d_attn = heads x query/key head width (MLA: qk_nope + qk_rope per head)."""
    if spec.mla is not None:
        return spec.num_heads * (spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim)
    return spec.num_heads * spec.head_dim


def estimate_speed(spec: ModelSpec, device: Any, count: int | None = None, *, weights_format: str = "bf16",
                   prompt_tokens: int = 1024, output_tokens: int = 256, concurrency: int = 1,
                   tensor_parallel: int | None = None, kv_dtype: str = "bf16", mla_mode: str = "latent",
                   link_bandwidth: float | None = None, compute_efficiency: float | None = None,
                   bandwidth_efficiency: float | None = None, layer_overhead: float | None = None,
                   identical_sequences: bool = False,
                   state_dtypes: tuple[str, str] = ("fp32", "fp32"), ubatch: int | None = None,
                   flash_attention: bool = True, kv_unified: bool | None = None,
                   engine_step_seconds: float | None = None, engine: str | None = None,
                   engine_version: str | None = None, nvlink_mesh: bool | None = None,
                   allreduce_latency: float | None = None, llamacpp_int8_mmq: bool = True,
                   group_size: int = GROUP_SIZE_DEFAULT, other_bytes: int = OTHER_BYTES_DEFAULT,
                   encoder_flops: float = 0.0, decode_loop: str = "generate",
                   attention: str = "sdpa", network: MachineNetwork | None = None,
                   async_scheduling: bool = False, data_parallel: int = 1,
                   expert_parallel: bool = False) -> SpeedEstimate:
    """Speed of ``spec`` on ``count`` x ``device`` serving ``concurrency`` sequences of ``prompt_tokens`` +
    ``output_tokens``. Decode is evaluated mid-generation (context = prompt + output/2). ``device``: a catalog
    ``Device`` or ``Instance``, or its name (``resolve_target``, the rule ``fit`` reads ``hardware`` by: an instance
    is its device); ``count``: the devices (None: an instance's device count, else 1).

    ``layer_overhead`` [s per layer per decode step] overrides the engine default (eq. 7 of formulas/speed.py);
    ``identical_sequences`` says every sequence carries the same tokens (benchmarks such as llama-batched-bench),
    so MoE routing picks the same experts for all of them. ``state_dtypes`` (conv, SSM) size the per-sequence state of
    recurrent layers, read and written once per decode step (formulas/recurrent_state.py); the default is the widest
    any engine keeps (llama.cpp: F32, F32), and ``fit`` passes the engine's own from the inference estimate.
    ``ubatch``: tokens per graph evaluation of llama.cpp (its n_ubatch; default ``engines.LLAMACPP_N_UBATCH``), the
    column count of its prefill matrix products and the cells beyond the window that its sliding layers keep and
    read at decode (engines.llamacpp_kv_cells). ``flash_attention``: llama.cpp's -fa (on by default since -fa
    auto; off in builds before 2025 unless given): without it the attention scores pass through memory during
    prefill. ``kv_unified``: llama.cpp's KV layout for the ``concurrency`` sequences (-kvu: one buffer for all;
    None: ``engines.LLAMACPP_KV_UNIFIED``, one stream per sequence), the cells its decode reads
    (engines.llamacpp_kv_cells, the rule the memory estimate sizes with). ``engine_step_seconds``: host time an
    engine spends between decode steps while the device waits, added to every decode step (eq. 7's fixed term),
    given: it replaces the engine's own rule. ``engine`` / ``engine_version``: the serving engine and its release
    (None: ``engines.CURRENT_VERSION``), whose host work per decode step ``engines.step_host`` states -- serial (added
    to the step, e.g. vLLM's V0 engine: ``efficiency.VLLM_V0_STEP_SECONDS``), overlapped (the step takes max(device,
    host), eq. 14: vLLM >= 0.14's asynchronous scheduling) or not established (named, warned, 0 s); None: no engine
    term (llama.cpp's is per layer, eq. 7). ``nvlink_mesh``: every pair of the ``tensor_parallel`` GPUs is joined
    directly by the GPU fabric: NVLink, or an AMD Infinity Fabric (xGMI) full mesh on a CDNA 3 / CDNA 4 board
    (``device.XGMI_MESH_ARCHITECTURES``; None: the device's catalog link, ``device.nvlink_mesh_for``), which with the
    engine picks the all-reduce kernel of each of the 2 L + 1 all-reduces of a step and its latency
    (``engines.tp_allreduce``, eq. 6's alpha; transformers: NCCL for each collective of its plan,
    formulas/tensor_parallel.py eq. TP2); ``allreduce_latency`` [s] replaces that latency.
    ``llamacpp_int8_mmq``: False for a llama.cpp build from before efficiency.LLAMACPP_INT8_MMQ_SINCE, whose quantized
    prefill products on Volta and later are dequantized to F16 and run through cuBLAS (efficiency.llamacpp_gemm_path);
    decode is unaffected. ``group_size``: the GPTQ/AWQ group the weights are stored at (the memory estimate's, its
    details' ``group_size``; formulas/weight_formats.py ``GROUP_SIZE_DEFAULT`` when none is stated), so the bytes a
    step reads are the bytes the memory estimate holds (``weight_bytes``, the one sizing of a format). ``other_bytes``:
    the element size of the tensors a quantized format leaves unquantized (embedding, lm_head, norms), the memory
    estimate's (its details' ``other_bytes``, from its dtype), not the compute dtype: transformers 5.24 loads them in
    the checkpoint's dtype on a CPU too (modeling_utils.py 4186-4187 ``dtype = "auto"``, 830-831 ``config.dtype``,
    883 ``hf_quantizer.update_dtype``, which quantizer_gptq.py 75-78, quantizer_awq.py 54-62 off CUDA/XPU and bnb's
    quantizers/base.py 100-110 leave as it is), while the matmuls run in fp32. ``encoder_flops``: the vision
    encoder's work on one prompt's images and video (formulas/vision_compute.py; the inference estimate's details
    ``vision_encoder_flops``), run before the language model's prefill and part of the TTFT.

    ``engine`` 'transformers' on a GPU (eager PyTorch; not T5, not GGUF, no ``engine_step_seconds`` given): each
    decode step and the prefill forward take max(device, K x tau_host) (formulas/launch_overhead.py eqs. K1, K4;
    K from the model, estimate/launch.py inference_kernels; tau_host efficiency.HOST_SECONDS_PER_KERNEL), the
    prefill's device time adds its memory-bound kernels (elementwise_traffic eq. E13), and the ``concurrency``
    prompts are prefilled together (``SpeedEstimate.batch_prefill``: TTFT = eq. P1 at concurrency).
    ``decode_loop``: the loop around the forward whose own kernels K counts: 'generate' (``generate()``'s, eq. K4)
    or 'forward' (a bare forward + argmax loop, the measure worker's: measure/workloads.py inference_pass).
    ``attention``: transformers' attn_implementation (sdpa, eager or flash): eager repeats K/V to every query head
    and writes the score tensor (formulas/hf_cache_traffic.py eqs. H2, H3). ``network``: the machines the
    ``tensor_parallel`` GPUs span and each one's network (speed_setup.MachineNetwork; None: one machine), which times
    the all-reduces across them (formulas/network.py eqs. (11), (13')). ``data_parallel`` > 1: one of that many
    data-parallel ranks (vLLM --data-parallel-size) of ``tensor_parallel`` devices, at ``concurrency`` sequences of
    its own; an MoE's routed experts split over all the ranks' devices (``expert_parallel``: whole experts, vLLM
    --enable-expert-parallel) and each MoE layer's tokens exchanged over the ranks at ``link_bandwidth``
    (formulas/serving_expert_parallel.py eqs. EP1-EP4; speed_layout.data_parallel_shares, expert_exchanged)."""
    if not isinstance(device, (str, Device, Instance)):  # before, a name or None: an AttributeError from inside
        raise InputError(f"device: expected a device or instance name (text), a Device or an Instance, got "
                         f"{type(device).__name__} {short(device, 40)}")
    device, inst_count, _, _ = resolve_target(device)
    count = inst_count or 1 if count is None else count
    if count < 1 or concurrency < 1 or prompt_tokens < 1 or output_tokens < 0:
        raise InputError("count, concurrency and prompt_tokens must be >= 1; output_tokens >= 0")
    refuse_tensor_parallel_apart(device, tensor_parallel or 1)  # infer's and fit's rule for a CPU or an Apple chip
    return speed_model(spec, device, weights_format=weights_format, prompt_tokens=prompt_tokens,
                       output_tokens=output_tokens, kv_dtype=kv_dtype, mla_mode=mla_mode,
                       compute_efficiency=compute_efficiency, bandwidth_efficiency=bandwidth_efficiency,
                       layer_overhead=layer_overhead, identical_sequences=identical_sequences,
                       state_dtypes=state_dtypes, ubatch=ubatch, flash_attention=flash_attention,
                       kv_unified=kv_unified, engine_step_seconds=engine_step_seconds, engine=engine,
                       engine_version=engine_version, allreduce_latency=allreduce_latency,
                       llamacpp_int8_mmq=llamacpp_int8_mmq, group_size=group_size,
                       other_bytes=other_bytes, encoder_flops=encoder_flops,
                       decode_loop=decode_loop, attention=attention,
                       async_scheduling=async_scheduling)(count, tensor_parallel, concurrency, link_bandwidth,
                                                                nvlink_mesh, False, network, data_parallel,
                                                                expert_parallel)


# (count, tensor_parallel, concurrency, link_bandwidth, nvlink_mesh, decode_only, network, data_parallel,
#  expert_parallel): speed_layout.layout_speed bound to one SpeedSetup
SpeedLayout = Callable[[int, int | None, int, float | None, bool | None, bool, MachineNetwork | None, int, bool],
                       SpeedEstimate]


def kernels_and_peak(spec: ModelSpec, device: Any, weights_format: str, engine: str | None,
                     assumptions: list[Assumption]) -> tuple[str, str, str, int, float | None, str]:
    """The kernels a decode runs and the bytes they read: (the format whose kernels run, the format whose bytes are
    read, the compute dtype, its bytes, the device's peak FLOP/s at it, the peak's key); the assumptions they
    take are appended to ``assumptions``."""
    # a model file: exact bytes, kernels of its dominant type
    fmt, why = file_kernel_format(spec) if weights_format == "file" else (normalize_format(weights_format), "")
    bytes_fmt = fmt  # the format whose bytes are read; fmt: the one whose kernels run them
    fmt = engine_kernel_format(engine, fmt)
    if fmt != bytes_fmt:
        runs = f"{engine} runs {bytes_fmt} in its own decode step (formats.engine_kernel_format), at its streaming rate"
        why = f"{why}: {runs}" if why else runs
    if why:  # one assumption per name: the kernels that run, with every step of the reason
        assumptions.append(Assumption("kernel_format", fmt, True, why))
    # FP8 GEMMs where the hardware runs them (device.fp8_tensor_cores), not where the catalog happens to list a rate
    dtype = compute_dtype_for(fmt, device.kind, fp8_tensor_cores(device))
    act_bytes = DTYPE_BYTES.get(dtype, 2)
    if dtype == "fp32":  # an fp32 prefill's matmuls: the one rule of an fp32 matmul (device.fp32_matmul_peak), TF32 off
        peak, peak_key = fp32_matmul_peak(device)[:2]
    elif dtype == "fp8":  # the sourced FP8 peak, or the architecture's FP8:16-bit ratio named (device.fp8_peak)
        peak, stand_in = fp8_peak(device)
        peak_key = "fp8"
        if stand_in is not None:
            assumptions.append(stand_in)
    else:
        peak, peak_key = device.peak_flops(dtype)
    if dtype == "fp32" and device.kind == "gpu":
        assumptions.append(Assumption("tf32", False, True, TF32_DEFAULT_WHY + ": the FP32 peak"))
    if peak is not None and peak_key != dtype:
        assumptions.append(Assumption("peak_dtype", peak_key, True,
                                      f"{device.id} lists no {dtype} rate; the {peak_key} tensor rate is used "
                                      "(equal on Ampere and later, NVIDIA Ampere whitepaper)"))
    return fmt, bytes_fmt, dtype, act_bytes, peak, peak_key


def sm_stream_capped_efficiency(device: Any, fmt: str, engine: str | None, engine_version: str | None,
                                bw: float | None, be: float, bandwidth_efficiency: float | None,
                                assumptions: list[Assumption], warnings: list[str]) -> float:
    """The bandwidth efficiency ``be`` after llama.cpp's and the serving engine's SM stream caps (formulas/speed.py
    eq. 12), where the SMs, not the DRAM, bound the stream."""
    cap = E.llamacpp_stream_cap(fmt, device.kind, device.vendor, device.sm_cycles_per_second)
    if cap is None and bw and bandwidth_efficiency is None and device.sm_cycles_per_second is None \
            and E.llamacpp_gemm_path(fmt, device.kind, device.vendor) is not None:
        missing = [n for n in ("sm_count", "fp32_cores") if getattr(device, n) is None] or ["flops.fp32"]
        warnings.append(f"{device.id}: no sourced {' or '.join(missing)}, so llama.cpp's SM stream cap "
                        "(formulas/speed.py eq. 12) is not applied: the decode may be timed faster than the card "
                        "streams (give them in a --hardware-file entry)")
    if cap is not None and bw and bandwidth_efficiency is None and cap < be * bw:
        be = cap / bw  # the SMs, not the DRAM, bound the stream (formulas/speed.py eq. 12)
        f = E.LLAMACPP_STREAM_BYTES_PER_SM_CYCLE
        assumptions.append(Assumption(
            "llamacpp_sm_stream_limit", f"{cap / 1e9:.0f} GB/s = {be:.3f} of {bw / 1e9:.0f} GB/s", True,
            f"formulas/speed.py eq. (12): {device.id}'s SMs x clock x {f.expected} B per SM-cycle stream less than the "
            f"memory delivers; {f.source}"))
    scap = ENG.serving_stream_cap(engine, engine_version, device.kind, device.architecture,
                                  device.sm_cycles_per_second)
    if scap is not None and bw and bandwidth_efficiency is None and scap[0] < be * bw:
        be = scap[0] / bw  # the SMs bound the serving engine's stream (formulas/speed.py eq. 12)
        assumptions.append(Assumption(
            "serving_sm_stream_limit", f"{scap[0] / 1e9:.0f} GB/s = {be:.3f} of {bw / 1e9:.0f} GB/s", True,
            f"formulas/speed.py eq. (12): {device.id}'s SMs x clock x {scap[1].expected} B per SM-cycle "
            f"({device.architecture}, a release of estimate/engines.py STREAM_LIMITED) stream less than the memory "
            f"delivers at the engine's share; {scap[1].source}"))
    return be


def engine_step_seconds_of(engine: str | None, engine_version: str | None, engine_step_seconds: float | None,
                           step_fixed: float, assumptions: list[Assumption],
                           warnings: list[str], async_scheduling: bool = False
                           ) -> tuple[float, float, tuple[str, float] | None]:
    """(a decode step's fixed seconds, the engine's host step it overlaps, the host step the decode range's slow end
    takes): ``step_fixed`` plus the engine's serial host step (eq. 7), or its overlapped one (eq. 14), from the
    engine's rule (``async_scheduling``: vLLM's --async-scheduling given, engines.step_host) or as given; the third,
    (mode, seconds), where the rule's host step is not established but bounded (``StepHost.range_seconds``), else
    None."""
    host_step = 0.0  # the engine's host step when it overlaps the device's (eq. 14)
    host_range: tuple[str, float] | None = None
    if engine is None and engine_version is not None:
        raise InputError(f"an engine version ({engine_version}) needs its engine (vllm or sglang)")
    rule = ENG.step_host(engine, engine_version, async_scheduling) if engine is not None else None
    newer = ENG.newer_release_note(engine, engine_version) if engine is not None else None
    if newer is not None:
        warnings.append(newer)
    if engine_step_seconds is not None:
        if engine_step_seconds < 0:
            raise InputError("engine_step_seconds must not be negative")
        step_fixed += engine_step_seconds
        assumptions.append(Assumption("engine_step_seconds", engine_step_seconds, False,
                                      "given: the engine's host time per decode step, not overlapped (eq. 7)"))
    elif rule is not None:
        how = ("serial: added to every decode step (formulas/speed.py eq. 7)" if rule.mode == "serial" else
               "overlapped: a decode step takes max(device, host) (formulas/speed.py eq. 14)")
        assumptions.append(Assumption(
            rule.name, rule.seconds if rule.established else "not established (0 s used)", engine_version is None,
            f"{rule.versions}, {how}; {rule.source}"))
        if not rule.established:
            where = "between steps" if rule.mode == "serial" else "overlapped with the device"
            if rule.range_seconds is not None:
                host_range = (rule.mode, rule.range_seconds)
            warnings.append(f"{rule.versions}: the engine's host time per decode step ({where}) is not established "
                            "by a published measurement and is left out: decode may be slower than estimated"
                            + (", most where the device step is short (small models)" if rule.mode != "serial"
                               else "")
                            + (f"; the decode range's low end takes {rule.range_seconds * 1e3:.2f} ms "
                               f"({ENG.HOST_RANGE_STAND_IN.name}, measured on a newer release) "
                               + ("between steps" if rule.mode == "serial" else "overlapped")
                               if rule.range_seconds is not None else ""))
        elif rule.mode == "serial":
            step_fixed += float(rule.seconds or 0.0)
        else:
            host_step = float(rule.seconds or 0.0)
    return step_fixed, host_step, host_range


def speed_model(spec: ModelSpec, device: Any, *, weights_format: str = "bf16", prompt_tokens: int = 1024,
                output_tokens: int = 256, kv_dtype: str = "bf16", mla_mode: str = "latent",
                compute_efficiency: float | None = None, bandwidth_efficiency: float | None = None,
                layer_overhead: float | None = None, identical_sequences: bool = False,
                state_dtypes: tuple[str, str] = ("fp32", "fp32"), ubatch: int | None = None,
                flash_attention: bool = True, kv_unified: bool | None = None,
                engine_step_seconds: float | None = None, engine: str | None = None,
                engine_version: str | None = None, allreduce_latency: float | None = None,
                llamacpp_int8_mmq: bool = True, group_size: int = GROUP_SIZE_DEFAULT,
                other_bytes: int = OTHER_BYTES_DEFAULT, encoder_flops: float = 0.0,
                decode_loop: str = "generate", attention: str = "sdpa", async_scheduling: bool = False) -> SpeedLayout:
    """``estimate_speed`` in two stages: what no layout changes (the weight format's kernels and bytes, the
    device's peak, bandwidth and efficiencies, the engine's step, the model's parameters and bytes), computed once
    here into a ``SpeedSetup``; then the returned ``layout_speed`` bound to it, ``(count, tensor_parallel,
    concurrency, link_bandwidth, nvlink_mesh, decode_only)``, ``estimate_speed``'s answer for one layout (the
    same arguments, the same numbers). fit ranks its tensor-parallel degrees with ``decode_only`` True: the
    decode at ``concurrency`` only (no prefill, no single-stream decode, no roofline's details or ranges: their
    ``SpeedEstimate`` has ``decode`` alone), the same ``decode`` the full answer carries."""
    if prompt_tokens < 1 or output_tokens < 0:
        raise InputError("count, concurrency and prompt_tokens must be >= 1; output_tokens >= 0")
    if decode_loop not in DECODE_LOOP_KERNELS:
        raise InputError(f"decode_loop must be one of {', '.join(DECODE_LOOP_KERNELS)}, got {decode_loop!r}")
    if encoder_flops < 0:
        raise InputError(f"encoder_flops must not be negative, got {encoder_flops}")
    if attention not in HC.ATTENTION:
        raise InputError(f"attention must be one of {', '.join(HC.ATTENTION)}, got {attention!r}")
    assumptions: list[Assumption] = []  # those before the load's identical_sequences
    warnings: list[str] = []
    fmt, bytes_fmt, dtype, act_bytes, peak, peak_key = kernels_and_peak(spec, device, weights_format, engine,
                                                                        assumptions)
    bw = device.bandwidth
    numa = numa_assumption(device)  # a detected machine of several sockets: its bandwidth and compute sockets
    if numa is not None and bw is not None:
        assumptions.append(numa)
    if peak is None:
        warnings.append(f"{device.id}: no sourced {dtype} peak FLOP/s; prefill/TTFT cannot be estimated")
    if bw is None:
        warnings.append(f"{device.id}: no sourced memory bandwidth; decode speed cannot be estimated")
    ce = compute_efficiency if compute_efficiency is not None else E.COMPUTE.expected
    bw_factor = E.decode_bandwidth_factor(device.kind, fmt, engine)
    be = bandwidth_efficiency if bandwidth_efficiency is not None else bw_factor.expected
    assumptions.append(Assumption("compute_efficiency", ce, compute_efficiency is None, E.COMPUTE.source))
    assumptions.append(Assumption("bandwidth_efficiency", be, bandwidth_efficiency is None, bw_factor.source))
    be = sm_stream_capped_efficiency(device, fmt, engine, engine_version, bw, be, bandwidth_efficiency, assumptions,
                                     warnings)
    ov_factor = E.decode_layer_overhead(device.kind, fmt)
    tau = layer_overhead if layer_overhead is not None else (ov_factor.expected if ov_factor else 0.0)
    if ov_factor is not None or layer_overhead is not None:
        assumptions.append(Assumption("decode_overhead_per_layer_seconds", tau, layer_overhead is None,
                                      ov_factor.source if ov_factor and layer_overhead is None else "given"))
    # eq. (15): the layers' chains of latency-bound kernels, a roof of the serving engine's decode step
    floor_factor = E.layer_kernel_floor(engine, device.kind, spec.mla is not None, spec.moe is not None)
    kernel_floor = step_overhead(spec.num_layers, floor_factor.expected) if floor_factor is not None else 0.0
    if floor_factor is not None:
        assumptions.append(Assumption(
            floor_factor.name, floor_factor.expected, True,
            f"formulas/speed.py eq. (15): a decode step takes at least {spec.num_layers} layers x "
            f"{floor_factor.expected * 1e6:.1f} us ({kernel_floor * 1e3:.2f} ms) of latency-bound kernels, whatever "
            f"its bytes; {floor_factor.source}"))
    pre = tuple(assumptions)  # the load's identical_sequences goes between pre and post (estimate_speed's order)
    assumptions = []
    step_fixed = step_overhead(spec.num_layers, tau)
    step_fixed, host_step, host_range = engine_step_seconds_of(engine, engine_version, engine_step_seconds,
                                                               step_fixed, assumptions, warnings, async_scheduling)

    # eager transformers launches every kernel of a step from Python: a step takes max(device, kernels x tau_host)
    # (formulas/launch_overhead.py eqs. K1, K4), a decode step and the prefill step (its forward and the loop's own
    # ops) alike
    launch_host = prefill_host = 0.0  # a one-sequence decode step's launches, the prefill forward's (eq. K1)
    # a decode step's host seconds at its sequences: a bitsandbytes NF4 model's dequantization kernels depend on the
    # rows a forward multiplies (eq. K5), other models' not
    decode_loop_kernels: int | None = None  # generate()'s (or a bare loop's) own kernels a step, on that path only
    engine_host = 0.0  # the engine's host step that a transformers step's launches overlap
    if engine == "transformers" and device.kind == "gpu" and engine_step_seconds is None \
            and spec.encoder_decoder is None and not fmt.startswith("gguf:"):
        per_step = DECODE_LOOP_KERNELS[decode_loop]
        tau_host = E.HOST_SECONDS_PER_KERNEL
        decode_loop_kernels = per_step
        kernels = transformers_step_kernels(spec, act_bytes, per_step, fmt, device.capability, 1)
        prompt_kernels = transformers_step_kernels(spec, act_bytes, per_step, fmt, device.capability, prompt_tokens)
        launch_host = host_seconds(kernels, tau_host.expected)
        prefill_host = host_seconds(prompt_kernels, tau_host.expected)
        engine_host = host_step
        host_step = max(host_step, launch_host)
        loop = ("generate()'s own ops" if decode_loop == "generate" else
                "a bare forward + argmax loop's (the measure worker's)")
        assumptions.append(Assumption("kernels_per_step", kernels, True,
                                      f"the forward and {per_step} kernels of {loop}: formulas/launch_overhead.py "
                                      f"{LAUNCH_INFERENCE_SOURCE}"))
        assumptions.append(Assumption(
            "transformers_host_seconds_per_step", round(launch_host, 6), True,
            f"{kernels} kernels x {tau_host.name} {tau_host.expected * 1e6:.2f} us: a decode step and the prefill "
            f"step take max(device, host) (formulas/launch_overhead.py eq. K1); {tau_host.source}"))
        if fmt in ("nf4", "nf4-dq"):
            assumptions.append(Assumption(
                "bitsandbytes_release", BNB_SERVING_RELEASE, True,
                f"the installed bitsandbytes' NF4 forward (formulas/launch_overhead.py eq. K5): the fused kernel, no "
                f"dequantization kernels, up to its rows on this GPU; {prompt_kernels - kernels} more "
                f"kernels in a {prompt_tokens}-token prefill"))
        if spec.moe is not None:
            warnings.append(
                "transformers MoE: its eager expert loop launches about ten kernels and reads the device back per "
                "expert hit (qwen3_moe/modeling_qwen3_moe.py:235-245 @5.24.0), and a prefill hits nearly every "
                "expert; the kernel count takes the top-k experts' linears only (formulas/launch_overhead.py eq. K4), "
                "so its host time is under-stated, most at prefill")

    # eager transformers' memory-bound kernels (formulas/elementwise_traffic.py eq. E13), on the devices whose
    # memory-bound share is sourced (the training step's rule, efficiency.memory_bound_bandwidth)
    eager_traffic = (E.memory_bound_bandwidth(device.kind) if engine == "transformers" and device.kind in ("gpu", "cpu")
                     and spec.encoder_decoder is None and not fmt.startswith("gguf:") else None)
    # eager transformers' decode also copies its DynamicCache each step (torch.cat) and, with eager attention, repeats
    # K/V to every query head and writes the score tensor (formulas/hf_cache_traffic.py eqs. H1-H3)
    score_layers = spec.layer_types.count("full") + spec.layer_types.count("sliding")
    eager_scores = attention == "eager"  # eager attention writes the score tensor whatever the cache's layout (eq. H3)
    repeats = (eager_scores and spec.mla is None and not spec.kv_repeated_in_transformers
               and spec.num_heads % max(spec.num_kv_heads, 1) == 0)  # K/V repeated to every query head (eq. H2)
    # the cache append is bytes, on every device eager transformers runs on (eq. H1; not E13's efficiency)
    hf_cache = (engine == "transformers" and spec.encoder_decoder is None and not fmt.startswith("gguf:"))

    if hf_cache:
        assumptions.append(Assumption(
            "transformers_cache_traffic", "torch.cat of the whole cache each step"
            + ("; K/V repeated to every query head" if repeats else "")
            + ("; the [b, heads, q, kv] scores (softmax in fp32)" if eager_scores else ""), True,
            f"a decode step moves 2 x its K/V bytes more (eq. H1){', + 2 g x (H2)' if repeats else ''}"
            f"{', + the scores (H3)' if eager_scores else ''} at the memory bandwidth with its other bytes; attention "
            f"{attention}; {HC.SOURCE}"))

    pc = count_params(spec)
    # the bytes held, as the memory estimate sizes them (transformers keeps fused experts unquantized under
    # bitsandbytes: formats.serving_fused_experts)
    # at the device's CUDA capability where the engine's dtype of a tensor depends on it (vLLM's fp32 gate): the
    # estimate's rule (estimate/device.py device_weights_capability), so a step reads the bytes the device holds
    capability = device_weights_capability(device, engine, spec.model_type, bytes_fmt)
    wb = file_weight_bytes(spec) if weights_format == "file" else weight_bytes(
        spec, bytes_fmt, group_size, other_bytes, serving_fused_experts(spec, engine, bytes_fmt), engine, capability)
    # vLLM's MXFP4 MoE kernels read each routed expert at their backend's padded sizes (formulas/vllm_mxfp4.py eq.
    # X4, the backend of the same capability the memory estimate sizes): the routed experts' bytes a step reads, here
    # at tensor parallel 1; a layout of tp ranks reads each rank's own padded shards (speed_layout.mxfp4_rank_read)
    mx_read = vllm_mxfp4_resident_extra(spec, bytes_fmt, 1, capability, read=True) \
        if engine == "vllm" and weights_format != "file" else 0
    if mx_read:
        wb = dataclasses.replace(wb, total=wb.total + mx_read,
                                 by_component={**wb.by_component,
                                               "experts": wb.by_component.get("experts", 0) + mx_read})
        backend = vllm_mxfp4_backend(capability)
        hp, ip = vllm_mxfp4_padded_sizes(backend, spec.hidden_size, spec.moe.expert_intermediate_size) \
            if spec.moe is not None else (0, 0)
        assumptions.append(Assumption(
            "mxfp4_expert_read", backend, True,
            f"vLLM's {backend} MXFP4 MoE kernels run at hidden {hp}, intermediate {ip} (the padded sizes they are "
            f"created at): a step reads {mx_read / 2**30:.3f} GiB more over all experts than the checkpoint's, "
            "in its routed share (formulas/vllm_mxfp4.py eq. X4); under tensor parallelism each rank's intermediate "
            "I / TP padded alike"))
    emb_params = pc.by_component.get("embedding", 0)
    emb_bytes = wb.by_component.get("embedding", 0)
    # decode reads the embedding row only; a tied embedding is read in full as the lm_head. A vision tower
    # runs once per image, not per text token (GGUF keeps it in a separate mmproj file). Gemma 3n's per-layer
    # input table is a lookup of one row per token, never a head.
    matmul_params = pc.active - (0 if spec.tie_word_embeddings else emb_params) - pc.by_component.get("vision", 0) \
        - pc.by_component.get("per_layer_embedding", 0)
    read_bytes = wb.total - (0 if spec.tie_word_embeddings else emb_bytes) - wb.by_component.get("vision", 0) \
        - wb.by_component.get("per_layer_embedding", 0)
    # the components matmul_params and read_bytes sum (a tied embedding is the head; the routed experts' active
    # share), for an engine whose plan keeps some of them whole on every rank (tensor_parallel.plan_rank_shares)
    unread = {"vision", "per_layer_embedding"} | (set() if spec.tie_word_embeddings else {"embedding"})
    matmul_parts = {c: float(n) for c, n in pc.by_component.items() if c not in unread}
    if "experts" in matmul_parts:
        matmul_parts["experts"] -= pc.total - pc.active
    t5 = ED.t5_params(spec) if spec.encoder_decoder is not None else None
    if t5 is not None:  # a decode step runs the decoder less its cached cross k/v, and the head (eq. S7)
        matmul_params = t5.decoder - t5.cross_kv + t5.head
        read_bytes = round(matmul_params * wb.total / pc.total)
        assumptions.append(Assumption(
            "encoder_decoder_step", f"source {prompt_tokens} tokens, target {output_tokens} tokens", True,
            "formulas/encoder_decoder_serving.py eq. (S7): prefill = the encoder over the source + the cross k/v "
            "projections; a decode step reads the decoder's weights less its cross k/v (their K/V are cached), the "
            "head, the self K/V over the target and the cross K/V over the source"))
    # a file's routed experts are known per layer (GGUF ffn_*_exps), not as a component
    expert_bytes = wb.by_component.get("experts", 0) or sum(wb.layer_expert_bytes)
    head_component = "embedding" if spec.tie_word_embeddings else "lm_head"
    head_params = pc.by_component.get(head_component, 0)
    width = attention_width(spec)
    # the K/V heads the engine caches, and so reads back, per token: the memory estimate's rule
    # (EngineProfile.caches_repeated_kv; transformers' Falcon new_decoder_architecture caches num_heads heads)
    profile = ENG.PROFILES.get(engine) if engine is not None else None
    repeated_kv = profile is not None and profile.caches_repeated_kv
    if repeated_kv and spec.kv_repeated_in_transformers:
        assumptions.append(Assumption(
            "kv_heads_read", spec.num_heads, True,
            f"{engine} caches K/V repeated to all {spec.num_heads} query heads (not {spec.num_kv_heads} kv_heads) and "
            "each decode step reads them back (formulas/kv_cache.py repeated_kv, the memory estimate's rule)"))
    post = tuple(assumptions)
    settled = tuple(warnings)
    decoded: dict[tuple[Any, ...], tuple[PhaseTime | None, Roofline | None, float | None, float | None]] = {}

    path = E.llamacpp_gemm_path(fmt, device.kind, device.vendor)

    # llama.cpp's KV layout (engines.llamacpp_kv_cells, the memory estimate's rule): a decode step reads the cells in
    # use of each stream, a sliding layer's whole stream once it is full (n_swa + n_ubatch cells per sequence, or
    # n_swa x n_seq + n_ubatch in one unified stream), not the window alone; other engines read the window
    llamacpp = fmt.startswith("gguf:")
    unified = ENG.LLAMACPP_KV_UNIFIED if kv_unified is None else kv_unified
    ub = ubatch or ENG.LLAMACPP_N_UBATCH

    # positional, in SpeedSetup's field order: 62 keywords cost ~5 us of name matching per call
    # (tests/estimate/test_speed_model.py test_speed_setup_built_in_field_order checks the order)
    setup = SpeedSetup(spec, device, prompt_tokens, output_tokens, kv_dtype, mla_mode, compute_efficiency,
                       identical_sequences, state_dtypes, ubatch, flash_attention, kv_unified, engine, engine_version,
                       allreduce_latency, llamacpp_int8_mmq, group_size, other_bytes, encoder_flops, fmt, bytes_fmt,
                       dtype, act_bytes, peak, peak_key, bw, ce, be, bw_factor, kernel_floor, step_fixed, host_step,
                       launch_host, prefill_host, eager_traffic, hf_cache, capability, pc, wb, mx_read, matmul_params,
                       read_bytes, matmul_parts, unread, t5, expert_bytes, head_component, head_params, width,
                       repeated_kv, pre, post, settled, decoded, path, llamacpp, unified, ub, repeats, eager_scores,
                       score_layers, decode_loop_kernels, engine_host, host_range)
    return MethodType(layout_speed, setup)  # a bound method: its call costs less than a partial's (~20 ns)


def for_device(sp: SpeedEstimate, device_id: str) -> SpeedEstimate:
    """``sp``, estimated for another device alike in everything estimate_speed reads but the id (fit's speed memo),
    as the answer for ``device_id``: the assumption and warning texts that name the device (peak_dtype,
    llamacpp_sm_stream_limit, serving_sm_stream_limit, the missing-peak / bandwidth / interconnect warnings) name
    ``device_id``. The id is replaced where it stands as a whole id (not inside a longer one)."""
    old = sp.device
    if old == device_id:
        return sp

    def named(text: str) -> str:
        if old not in text:
            return text
        parts = text.split(old)
        out = [parts[0]]
        for k in range(1, len(parts)):  # whole where neither neighbour continues an id
            # an empty part between two occurrences: the neighbour is the id itself
            before = parts[k - 1][-1:] or (old[-1:] if k > 1 else "")
            after = parts[k][:2] or (old[:2] if k < len(parts) - 1 else "")
            whole = not (before and (before.isalnum() or before in "_.-")) and not (
                after[:1] and (after[:1].isalnum() or after[:1] in "_-" or (after[:1] == "." and after[1:].isalnum())))
            out += (device_id if whole else old, parts[k])
        return "".join(out)

    assumptions = tuple(Assumption(a.name, a.value, a.default, named(a.why)) if old in a.why else a
                        for a in sp.assumptions)
    return replace_fields(sp, device=device_id, assumptions=assumptions, warnings=tuple(named(w) for w in sp.warnings))


def split_decode(spec: ModelSpec, split: dict[str, Any], gpu: Any, host: Any | None, weights_format: str,
                 context: int, n_ctx: int, link_bandwidth: float | None) -> dict[str, Any]:
    """Decode of one sequence over a llama.cpp layer split (eq. 8 of formulas/speed.py): each device streams what
    it holds at its own bandwidth (GPU layers at the GPU's, host layers and --n-cpu-moe experts at the host's), one
    after the other, plus the activations crossing PCIe. ``split`` is the estimate's placement
    (details["split"]); ``context`` the tokens attended mid-generation; ``host`` a CPU catalog device or None."""
    devices = split["devices"]
    warnings: list[str] = []
    row = split["split_mode"] == "row"
    if row and (spec.moe is not None or spec.recurrent is not None or spec.fused_qkv):
        return {"seconds": None, "warnings": ["-sm row decode speed is modelled for dense attention models with "
                                              "separate q/k/v matrices only (eq. 8r); not for this model"]}
    frac = 1.0
    if spec.moe is not None:
        frac = moe_expert_fraction(spec.moe.experts_per_token, spec.moe.num_experts, 1)
    kv_share = min(1.0, context / n_ctx) if n_ctx else 0.0
    rows, parts = [], []
    row_parts: list[tuple[float, float, float]] = []  # -sm row: each GPU's rows, read at once (eq. 8r)
    serial_parts: list[tuple[float, float, float]] = []  # -sm row: what runs one device after the other
    ov = E.decode_layer_overhead(gpu.kind, weights_format)
    tau = ov.expected if ov else 0.0
    gpu_layers = 0
    for d in devices:
        is_host = d["device"] == "host"
        # + the sequence's recurrent state, read and written once per token (hybrid models)
        read = d["weights"] - d.get("experts", 0) * (1 - frac) + d["kv_cache"] * kv_share \
            + 2 * d.get("recurrent_state_per_sequence", 0)
        if is_host:
            read -= split.get("embedding", 0)  # decode reads one embedding row
            dev = host
        else:
            dev = gpu
            gpu_layers += d["n_layers"]
        if read <= 0:
            continue
        bw = dev.bandwidth if dev is not None else None
        eff = E.decode_bandwidth_factor(dev.kind if dev is not None else "cpu", weights_format).expected
        cap = None if dev is None or is_host else E.llamacpp_stream_cap(weights_format, dev.kind, dev.vendor,
                                                                        dev.sm_cycles_per_second)
        if cap is not None and bw and cap < eff * bw:
            eff = cap / bw  # formulas/speed.py eq. (12)
        if bw is None:
            warnings.append(f"{d['device']}: no memory bandwidth"
                            + (" (give --host-device, a CPU from the catalog: `llmsizer hardware list --kind cpu`)" if is_host else ""))
            return {"seconds": None, "warnings": warnings}
        parts.append((read, float(bw), eff))
        if row and not is_host:  # its row share of every split matrix (norms, hidden x 4 B a layer, with them)
            kv_read = d["kv_cache"] * kv_share
            row_parts.append((read - kv_read, float(bw), eff))
            serial_parts.append((kv_read, float(bw), eff))
        elif row:
            serial_parts.append((read, float(bw), eff))
        rows.append({"device": d["device"], "bytes": read, "bandwidth": float(bw), "efficiency": eff,
                     "seconds": read / (float(bw) * eff)})
    order = [d for d in devices if d["device"] == "host" and d["n_layers"] > 0] + \
        [d for d in devices if d["device"] != "host" and d["n_layers"] > 0]
    hidden = spec.hidden_size * 4
    transfer = hidden * max(len(order) - 1, 0)
    if order and order[0]["device"] != "host":
        transfer += hidden  # the embedding row goes from the host to the first GPU
    if any(d["device"] != "host" and "output" in d["layers"] for d in devices):
        transfer += spec.vocab_size * 4  # logits back to the host for sampling
    if transfer and link_bandwidth is None:
        warnings.append("no PCIe bandwidth for the device: the transfers between devices are not counted")
    if row:
        extra, exchanges = row_split_exchanges(spec, split, weights_format)
        transfer += extra
        alpha = E.LLAMACPP_ROW_EXCHANGE
        t = row_split_decode_time(row_parts, serial_parts, transfer, link_bandwidth, exchanges, alpha.expected,
                                  step_overhead(gpu_layers, tau))
        return {"seconds": t.seconds, "tokens_per_second": 1.0 / t.seconds if t.seconds else None,
                "memory_seconds": t.memory_seconds, "transfer_seconds": t.comm_seconds, "transfer_bytes": transfer,
                "overhead_seconds": t.overhead_seconds, "devices": rows, "warnings": warnings,
                "exchanges": exchanges, "exchange_seconds": alpha.expected,
                "source": "formulas/speed.py eq. (8r)"}
    t = split_decode_time(parts, transfer, link_bandwidth, step_overhead(gpu_layers, tau))
    return {"seconds": t.seconds, "tokens_per_second": 1.0 / t.seconds if t.seconds else None,
            "memory_seconds": t.memory_seconds, "transfer_seconds": t.comm_seconds, "transfer_bytes": transfer,
            "overhead_seconds": t.overhead_seconds, "devices": rows, "warnings": warnings,
            "source": "formulas/speed.py eq. (8)"}


def split_prefill(spec: ModelSpec, split: dict[str, Any], gpu_prefill: PhaseTime, prompt: int, ubatch: int,
                  host: Any | None, weights_format: str, link_bandwidth: float, n_ctx: int) -> dict[str, Any]:
    """The prefill of ``prompt`` tokens over a llama.cpp split whose host RAM holds layers (-ngl) or experts
    (--n-cpu-moe): eq. (8p) of formulas/speed.py, the all-on-GPU prefill ``gpu_prefill`` plus, per ``ubatch``-token
    ubatch, the host's weights copied over the link (``link_bandwidth``; only the experts the ubatch routes to, eq.
    5) and the host layers' K/V cells the ubatch attends (their KV cache per token: the host's ``kv_cache`` of
    ``n_ctx`` cells), or read by the ``host`` CPU for a ubatch under the offload threshold. ``split``: the
    estimate's placement."""
    held = [d for d in split["devices"] if d["device"] == "host"]
    kv_per_token = float(sum(d.get("kv_cache", 0) for d in held)) / max(n_ctx, 1)
    experts = float(sum(d.get("experts", 0) for d in held))
    dense = float(sum(d["weights"] for d in held)) - experts - split.get("embedding", 0)  # (GET_ROWS stays on host)
    full, rest = divmod(max(prompt, 1), ubatch)
    ubatches = [ubatch] * full + ([rest] if rest else [])
    frac = [moe_expert_fraction(spec.moe.experts_per_token, spec.moe.num_experts, u) if spec.moe else 1.0
            for u in ubatches]
    hbw = float(host.bandwidth) if host is not None and host.bandwidth else None
    eff = E.decode_bandwidth_factor("cpu", weights_format).expected
    seconds, transfer, on_host = split_prefill_time(gpu_prefill.seconds, ubatches, max(dense, 0.0), experts, frac,
                                                    link_bandwidth, hbw, eff, kv_per_token)
    return {"seconds": seconds, "gpu_seconds": gpu_prefill.seconds, "transfer_seconds": transfer,
            "host_seconds": on_host, "ubatch": ubatch, "ubatches": len(ubatches),
            "host_layer_bytes": max(dense, 0.0), "host_expert_bytes": experts, "host_kv_bytes_per_token": kv_per_token,
            "link_bandwidth": link_bandwidth, "source": "formulas/speed.py eq. (8p)"}


# ggml-org/llama.cpp@f6d77a1ba0ac794e950bd3abb630b904bdcd8fb8 ggml/src/ggml-cuda: MATRIX_ROW_PADDING (common.cuh), the
# input row padded to it before q8_1 quantization (ggml-cuda.cu ggml_cuda_op_mul_mat ``src1_padded_col_size``), and
# block_q8_1 (ggml-common.h: QK8_1 = 32 int8 values + a half2 of scale and sum, 36 B)
ROW_PADDING = 512
Q8_1_BLOCK_VALUES, Q8_1_BLOCK_BYTES = 32, 36
_FLOAT_FORMATS = ("f32", "f16", "bf16", "fp16", "fp32")


def row_split_exchanges(spec: ModelSpec, split: dict[str, Any], weights_format: str) -> tuple[int, int]:
    """-sm row, one decode token: the bytes crossing the link for the split matmuls and their count M (eq. 8r).

    Per matmul of a K x N matrix (ggml-cuda.cu ``ggml_cuda_op_mul_mat``, ne11 = 1): the main GPU (0, llama.cpp's
    default ``--main-gpu``) sends its input to each other GPU that holds rows, q8_1-quantized for a quantized matrix
    (ceil(K / 512) x 512 / 32 x 36 B) or f32 (K x 4 B) otherwise, and each other GPU sends its rows of the f32 output
    back (its N x share x 4 B). The matmuls of a GPU layer: q, k, v, o and the MLP's up, down and, gated, gate; the
    output matrix when it is on a GPU."""
    gpus = [d for d in split["devices"] if d["device"] != "host"]
    shares = [float(x) for x in split["tensor_split"]]
    others = sum(1 for x in shares[1:] if x > 0)
    main_share = shares[0] / sum(shares)
    quantized = not any(weights_format.lower().endswith(f) for f in _FLOAT_FORMATS)
    q, kv = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    h, f = spec.hidden_size, spec.intermediate_size
    shapes = [(h, q), (h, kv), (h, kv), (q, h), (h, f), (f, h)] + ([(h, f)] if spec.mlp_gated else [])
    out_on_gpu = any("output" in d["layers"] for d in gpus)
    layers = sum(d["n_layers"] for d in gpus) - (1 if out_on_gpu else 0)  # (n_layers counts the output layer)

    def one(k: int, n: int) -> float:
        inp = (-(-k // ROW_PADDING) * ROW_PADDING // Q8_1_BLOCK_VALUES * Q8_1_BLOCK_BYTES) if quantized else k * 4
        return others * inp + n * (1 - main_share) * 4

    per_layer = sum(one(k, n) for k, n in shapes)
    nbytes = layers * per_layer + (one(h, spec.vocab_size) if out_on_gpu else 0.0)
    return int(nbytes), layers * len(shapes) + (1 if out_on_gpu else 0)
