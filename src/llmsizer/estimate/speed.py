"""Inference speed of a model on N x device: composes ``formulas/speed.py`` with the model's tensor inventory
and the device's sourced peaks. No arithmetic of its own beyond unpacking (every equation is in formulas/).

Per device under tensor parallelism t: weights/t (``shard_weights``), the KV share of ``kv_fraction_per_device``,
FLOPs/t, plus two all-reduces of the activations per layer over the interconnect (formulas/speed.py eq. 6); on
transformers the collectives its tensor-parallel plan runs instead (formulas/tensor_parallel.py
``transformers_plan_collectives``, eq. TP2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import MethodType
from typing import Any

from ..catalog.hardware import Device, Instance
from ..errors import InputError
from ..formulas import encoder_decoder_serving as ED
from ..formulas import flash_attention as FA
from ..formulas import hf_cache_traffic as HC
from ..formulas import network as NW
from ..formulas.dtypes import DTYPE_BYTES
from ..formulas.elementwise_traffic import SOURCE_EAGER, elementwise_seconds, inference_forward_bytes_per_token
from ..formulas.kv_cache import cross_attention_kv, kv_cache
from ..formulas.launch_overhead import BNB_SERVING_RELEASE, DECODE_LOOP_KERNELS, host_seconds
from ..formulas.launch_overhead import INFERENCE_SOURCE as LAUNCH_INFERENCE_SOURCE
from ..formulas.params import ParamCounts, count_params, routed_share
from ..formulas.recurrent_state import layer_state_bytes_per_device, recurrent_state
from ..formulas.speed import (
    METAL_SIMDGROUP_MATMUL_CYCLES,
    PhaseTime,
    Roofline,
    allreduce_time,
    attended_tokens,
    batched_decode_time,
    chunked_attended_tokens,
    decode_flops,
    dequantize_time,
    gemm_time,
    host_overlapped_step,
    identical_sequence_routings,
    metal_dequant_share,
    mmq_tile_reads,
    moe_expert_fraction,
    moe_expert_tiles,
    phase_roofline,
    phase_time,
    prefill_flops,
    row_split_decode_time,
    split_decode_time,
    split_prefill_time,
    step_overhead,
    unfused_attention_time,
)
from ..formulas.tensor_parallel import (
    HEAD_REPLICATING_ENGINES,
    activation_split,
    kv_fraction_per_device,
    plan_collective_seconds,
    plan_rank_shares,
    shard_weights,
    transformers_plan_collectives,
)
from ..formulas.weight_formats import (
    GGUF_FTYPES,
    GROUP_SIZE_DEFAULT,
    OTHER_BYTES_DEFAULT,
    WeightBytes,
    file_weight_bytes,
    gguf_product_weights,
    normalize_format,
    weight_bytes,
)
from ..frozen import fast_init, replace_fields
from ..inputs import short
from ..result import Assumption, json_data
from ..specs import ModelSpec
from . import efficiency as E
from . import engines as ENG
from . import ranges as R
from .device import (
    TF32_DEFAULT_WHY,
    device_weights_capability,
    fp8_peak,
    fp8_tensor_cores,
    fp32_matmul_peak,
    int8_peak,
    llamacpp_backend,
    numa_assumption,
    nvlink_link_bandwidth,
    nvlink_link_why,
    nvlink_mesh_for,
    peer_to_peer,
    peer_to_peer_why,
    refuse_tensor_parallel_apart,
    resolve_target,
)
from .formats import engine_kernel_format, file_kernel_format, serving_fused_experts
from .launch import inference_kernels

# llama.cpp cache types (-ctk/-ctv) as the speed estimate names them -> whether ggml-cuda's flash attention sees a
# quantized K/V type (fattn.cu L253-268: F32, F16, Q4_0, Q8_0 have kernels; BF16 and the others none at @7b6abb2)
_FA_KV_TYPES = {"fp16": False, "fp32": False, "q8_0": True, "q4_0": True}


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


@fast_init
@dataclass(frozen=True)
class SpeedEstimate:
    """Prefill / time-to-first-token and decode speed for one replica on ``count`` devices."""

    model: str
    device: str
    count: int
    tensor_parallel: int
    weights_format: str
    compute_dtype: str
    prompt_tokens: int
    output_tokens: int
    concurrency: int
    prefill: PhaseTime | None
    decode: PhaseTime | None
    decode_single: PhaseTime | None
    roofline_prefill: Roofline | None
    roofline_decode: Roofline | None
    assumptions: tuple[Assumption, ...] = ()
    warnings: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    serving_engine: str | None = None  # vllm / sglang: the engine whose release scope picks the decode band
    engine_version: str | None = None  # its release (None: engines.CURRENT_VERSION)
    eager_engine: str | None = None  # transformers: its step is timed with the launch rule (launch_overhead eq. K4)
    # the engine prefills the ``concurrency`` prompts in one forward before decoding them together (transformers'
    # generate() of a padded batch, and the measure worker: measure/workloads.py inference_pass): its TTFT and
    # prefill rate are the batch prefill's (eq. P1 at concurrency), the quantity its prefill rows measured
    batch_prefill: bool = False
    # a continuous-batching engine at ``concurrency`` requests, each replaced when it finishes: the steady state of
    # formulas/serving_queue.py eqs. Q4-Q9 (estimate/serving_load.py under_load), whose TTFT and per-user rate are
    # what those users see; None where not modelled (one sequence, a static batch, no prefill or decode speed)
    load: dict[str, Any] | None = None

    @property
    def under_load(self) -> dict[str, Any] | None:
        """``load`` by the name its JSON gives it (``to_dict``'s ``under_load``): one name on every surface."""
        return self.load

    @property
    def ttft_idle_seconds(self) -> float | None:
        """Time to first token with no other prompt competing: one request's prefill on an idle replica, or, where
        the engine prefills the ``concurrency`` prompts together (``batch_prefill``), the prefill of all of them (eq.
        P1): no prompt's first token comes before the forward over the batch ends."""
        if self.prefill is None:
            return None
        return self.prefill_batch_seconds() if self.batch_prefill else self.prefill.seconds

    @property
    def ttft_seconds(self) -> float | None:
        """Time to first token at ``concurrency``: the loaded mean (``load``, formulas/serving_queue.py eq. Q6: its
        own prefill plus the other requests' prompts ahead of it) where modelled, else ``ttft_idle_seconds``."""
        return self.load["ttft_seconds"] if self.load is not None else self.ttft_idle_seconds

    @property
    def tokens_per_second_per_user(self) -> float | None:
        """Output tokens/s one user sees: one per decode step, the steps stretched by the other requests' prefill
        chunks where the load is modelled (formulas/serving_queue.py eq. Q5), else one per decode step."""
        if self.load is not None:  # a prefill-only load (output 0) has no step: no per-user rate
            return 1.0 / self.load["step_seconds"] if self.load["step_seconds"] else None
        return self.decode_tokens_per_second_per_user

    @property
    def decode_tokens_per_second_per_user(self) -> float | None:
        """Output tokens/s one user sees with no prompt competing, 1 / t_d [tokens/s]: one token per decode step
        (formulas/speed.py eq. 4's step); ``tokens_per_second_per_user`` where no load is modelled."""
        return 1.0 / self.decode.seconds if self.decode else None

    @property
    def decode_tokens_per_second(self) -> float | None:
        """Aggregate decode rate of ``concurrency`` sequences with no prompt competing, C / t_d [tokens/s]
        (formulas/speed.py eq. 4's step): the quantity the decode and batched-decode validation rows measure (a
        benchmark's time per output token excludes the first token), so the calibrated decode band
        (``decode_band``) multiplies this figure; not the output a loaded service delivers (``tokens_per_second``)."""
        return self.concurrency / self.decode.seconds if self.decode else None

    @property
    def tokens_per_second(self) -> float | None:
        """Output tokens/s of the replica in total at ``concurrency``: where the load is modelled, the loaded output
        rate (``load["output_tokens_per_second"]``, formulas/serving_queue.py eq. Q7: requests/s x output tokens,
        each request's TTFT and its steps stretched by the other prompts' prefill chunks, eq. Q5b), so it never
        exceeds C x ``tokens_per_second_per_user``; else the decode rate ``decode_tokens_per_second``."""
        if self.load is not None:  # a prefill-only service (no output tokens) has no token rate, as unloaded
            return float(self.load["output_tokens_per_second"]) if self.output_tokens else None
        return self.decode_tokens_per_second

    @property
    def single_stream_tokens_per_second(self) -> float | None:
        return 1.0 / self.decode_single.seconds if self.decode_single else None

    @property
    def prefill_tokens_per_second(self) -> float | None:
        """Prompt tokens prefilled per second over the TTFT: one prompt's, or the ``concurrency`` prompts' of a batch
        prefill (``batch_prefill``). The prefill band (estimate/ranges.py) multiplies this figure, the one its rows
        measured (measure/compare.py throughput_rows reads it)."""
        t = self.ttft_idle_seconds
        if not t:
            return None
        return (self.concurrency if self.batch_prefill else 1) * self.prompt_tokens / t

    def prefill_batch_seconds(self, prompts: int | None = None) -> float | None:
        """Wall time of ``prompts`` (default: ``concurrency``) prompts prefilled together: eq. (3) of
        formulas/speed.py over the b prompts, b times one prompt's FLOPs, attention and communication against one
        read of the weights::

            T_prefill(b) = max(b t_c, t_m) + b (t_comm + t_attn + t_elementwise) + t_overhead        (P1)

        (b = 1: the TTFT). A compute-bound prefill (b t_c >= t_m) so takes b times one prompt's: batching prompts
        adds no prefill throughput beyond 1 / t_c prompts per second. An engine that splits the batch into steps
        of max_num_batched_tokens reads the weights once per step, which a compute-bound step hides."""
        if self.prefill is None:
            return None
        p, b = self.prefill, self.concurrency if prompts is None else prompts
        if b < 1:
            raise InputError(f"prompts must be >= 1, got {b}")
        device = (max(b * p.compute_seconds, p.memory_seconds)
                  + b * (p.comm_seconds + p.attention_seconds + p.elementwise_seconds) + p.overhead_seconds)
        return max(device, p.host_seconds)  # one forward's launches for the b prompts (formulas/launch_overhead eq. K1)

    @property
    def request_seconds(self) -> float | None:
        """Time one of the ``concurrency`` requests in service is held (formulas/network.py eq. 9, the W of
        Little's law and of formulas/serving_queue.py eqs. Q1-Q3): its TTFT then its output tokens at the decode
        speed (both at ``concurrency`` where ``load`` is modelled: eqs. Q5b, Q8), and never less than the prefill of every prompt in service (eq. P1 at ``concurrency``): the replica
        cannot finish its C requests faster than it prefills their C prompts, so C / W stays within its prefill
        throughput / prompt tokens. A prefill-only request (output 0) is held for exactly that batch prefill, not for
        one prompt's alone on an idle replica. (Chunked prefill, which shares decode steps with prefill chunks, is not
        modelled beyond that bound.) None without the speeds it needs."""
        if self.ttft_seconds is None or (self.output_tokens and not self.tokens_per_second_per_user):
            return None
        return NW.request_seconds(self.ttft_seconds, self.output_tokens, self.tokens_per_second_per_user,
                                  self.prefill_batch_seconds())

    @property
    def static_batch_seconds(self) -> float | None:
        """Wall time of one static batch: ``concurrency`` prompts prefilled together (eq. P1), then decoded to
        ``output_tokens`` each (an offline batch job; vLLM's benchmarks/benchmark_latency.py times this); the first
        token comes from the prefill, the other output_tokens - 1 from decode steps of the b sequences at the
        mid-generation context."""
        prefill = self.prefill_batch_seconds()
        if prefill is None or self.decode is None:
            return None
        return prefill + max(self.output_tokens - 1, 0) * self.decode.seconds

    @property
    def engine(self) -> str | None:
        """The engine whose validation rows calibrate this estimate's ranges (estimate/ranges.py)."""
        if self.eager_engine is not None:
            return self.eager_engine
        return R.LLAMACPP if self.weights_format.startswith("gguf:") and self.serving_engine is None else None

    @property
    def prefill_band(self) -> R.Band | None:
        """The calibrated band of the prefill rate (estimate/ranges.py); None without validation rows."""
        if "split_prefill" in self.details:  # eq. 8p: no validation row measures a split's prefill
            return None
        if self.engine == R.LLAMACPP:  # its backend's band, else the engine-wide one (ranges.llamacpp_band)
            return R.llamacpp_band(R.PREFILL, self.details.get("llamacpp_backend"))[0]
        return R.band_for(R.PREFILL, self.engine or "")

    @property
    def decode_band(self) -> R.Band | None:
        """The calibrated band of the aggregate decode rate (batched band above one sequence): a serving engine's
        from its release scope, or the pooled serving band where that scope has no rows (ranges.serving_band)."""
        kind = R.BATCHED if self.concurrency > 1 else R.DECODE
        if self.details.get("split_decode_on_host"):  # eq. 8 with host-held weights: no validation row measures it
            return None
        if self.serving_engine in R.SERVING_ENGINES:
            return R.serving_band(kind, self.serving_engine, self.engine_version, self.device,
                                  self.tensor_parallel, bool(self.details.get("mla_moe")),
                                  bool(self.details.get("kernel_floor_bound")))[0]
        if self.engine == R.LLAMACPP:
            return R.llamacpp_band(kind, self.details.get("llamacpp_backend"))[0]
        return R.band_for(kind, self.engine or "")

    @property
    def prefill_range(self) -> tuple[float, float] | None:
        """Calibrated [low, high] prefill tokens/s (``prefill_band``); None without validation rows."""
        return R.band_range(self.prefill_band, self.prefill_tokens_per_second)

    @property
    def decode_range(self) -> tuple[float, float] | None:
        """Calibrated [low, high] aggregate decode tokens/s with no prompt competing (``decode_band`` x
        ``decode_tokens_per_second``, the figure its rows measured)."""
        return R.band_range(self.decode_band, self.decode_tokens_per_second)

    @property
    def range_coverage(self) -> dict[str, dict[str, Any] | None]:
        """The coverage of each calibrated range (``ranges.range_coverage``: its band's ``Band.coverage``; None where
        that range is None), keyed as ``to_dict``'s calibrated_ranges; JSON and text print these. ``tokens_per_second``
        is a deprecated alias of ``decode_tokens_per_second`` (the decode range's key before the loaded total took
        that name), kept for one release."""
        decode = R.range_coverage(self.decode_band, self.decode_tokens_per_second)
        return {"prefill_tokens_per_second": R.range_coverage(self.prefill_band, self.prefill_tokens_per_second),
                "decode_tokens_per_second": decode, "tokens_per_second": decode}

    def to_dict(self) -> dict[str, Any]:
        return json_data({
            "kind": "speed", "model": self.model, "device": self.device, "count": self.count,
            "tensor_parallel": self.tensor_parallel, "weights_format": self.weights_format,
            "compute_dtype": self.compute_dtype, "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens, "concurrency": self.concurrency,
            "ttft_seconds": self.ttft_seconds, "ttft_idle_seconds": self.ttft_idle_seconds,
            "prefill_tokens_per_second": self.prefill_tokens_per_second,
            "tokens_per_second_per_user": self.tokens_per_second_per_user,
            "tokens_per_second": self.tokens_per_second,
            "decode_tokens_per_second": self.decode_tokens_per_second,
            "single_stream_tokens_per_second": self.single_stream_tokens_per_second,
            "prefill": self.prefill.to_dict() if self.prefill else None,
            "decode": self.decode.to_dict() if self.decode else None,
            "roofline": {"prefill": self.roofline_prefill.to_dict() if self.roofline_prefill else None,
                         "decode": self.roofline_decode.to_dict() if self.roofline_decode else None},
            "assumptions": [a.to_dict() for a in self.assumptions], "warnings": list(self.warnings),
            "details": self.details, "under_load": self.load,
            "calibrated_ranges": {"prefill_tokens_per_second": self.prefill_range,
                                  "decode_tokens_per_second": self.decode_range,
                                  "tokens_per_second": self.decode_range,  # deprecated alias (one release)
                                  "coverage": self.range_coverage,
                                  "source": "estimate/ranges.py: the band of this engine's validation rows; "
                                            "coverage: the share of measured runs it holds, against its target"},
        })


def _attended_all_layers(spec: ModelSpec, tokens: int, past: int) -> float:
    """Sum over layers of the tokens each new token attends, sliding layers capped at their window, chunked ones
    (Llama 4: spec.chunked_attention) within their chunk (formulas/speed.py chunked_attended_tokens)."""
    n_sliding = spec.layer_types.count("sliding")
    n_full = spec.layer_types.count("full")  # layers without attention ("none") attend to nothing
    total = n_full * attended_tokens(tokens, past)
    if n_sliding and spec.chunked_attention and spec.sliding_window:
        total += n_sliding * chunked_attended_tokens(tokens, past, spec.sliding_window)
    elif n_sliding:
        total += n_sliding * attended_tokens(tokens, past, spec.sliding_window)
    return total


def _attention_flops_step(spec: ModelSpec, width: int, tokens: int, past: int) -> float:
    """Causal attention FLOPs over all layers, sliding layers capped at their window (speed.py eq. 2)."""
    return 4.0 * width * _attended_all_layers(spec, tokens, past)


def _llamacpp_prefill_efficiency(spec: ModelSpec, device: Any, path: str, pc: Any, gemm_params: float, tokens: int,
                                 ubatch: int, flops: float, attn_flops: float, peak: float,
                                 assumptions: list[Assumption],
                                 flash_attention: bool = True, quantized_bytes: float = 0.0,
                                 stream_rate: float | None = None, expert_quantized_bytes: float = 0.0) -> float:
    """llama.cpp prefill on an NVIDIA GPU: eq. (9) of formulas/speed.py per kernel path (efficiency.LLAMACPP_MMQ):
    dense products at the path's efficiency, routed-expert products on MMQ (mul_mat_id) as the 128-column tiles each
    expert's columns fill, each a full tile's work at efficiency.LLAMACPP_MMQ_ID plus a read of the expert's weights
    (formulas/speed.py eq. 9'''), attention on the FP16 tensor path; returned as
    the equivalent share of ``peak`` so that eq. (3) keeps one form. On the dequantize + cuBLAS path of builds before
    efficiency.LLAMACPP_INT8_MMQ_SINCE the products run as the F16 path's and each ubatch first converts the
    weights to F16: the ``quantized_bytes`` of the ``gemm_params`` read and 2 bytes per weight written, per ubatch
    at ``stream_rate`` [B/s] (formulas/speed.py eq. 9'). On the MMQ path the dense (non-expert) products read their
    ``quantized_bytes`` less ``expert_quantized_bytes`` once per column tile of efficiency.LLAMACPP_MMQ_TILE_COLUMNS
    (formulas/speed.py eq. 9''), added to their arithmetic."""
    if path == E.DEQUANT_CUBLAS_PATH and stream_rate:
        t_dq = dequantize_time(quantized_bytes, gemm_params, tokens, ubatch, stream_rate)
        assumptions.append(Assumption(
            "llamacpp_dequantize_seconds", t_dq, True,
            f"per ubatch of {ubatch} tokens {quantized_bytes / 1e9:.2f} GB of quantized weights read and their F16 "
            f"copy written (formulas/speed.py eq. 9') at "
            f"{stream_rate / 1e9:.0f} GB/s: ggml-cuda.cu ggml_cuda_op_mul_mat_cublas to_fp16_cuda (ggml-org/ggml "
            "@8c44bc9 L1233-1268), the path of quantized products over 32 columns before "
            + E.LLAMACPP_INT8_MMQ_SINCE))
        t_gemm = flops / (peak * _llamacpp_prefill_efficiency(
            spec, device, E.CUBLAS_PATH, pc, gemm_params, tokens, ubatch, flops, attn_flops, peak, assumptions,
            flash_attention))
        return flops / (peak * (t_gemm + t_dq))
    mmq = path == E.MMQ_PATH
    factor = E.LLAMACPP_MMQ if mmq else E.LLAMACPP_CUBLAS
    gemm_peak, gemm_key = device.peak_flops("fp16_acc16")
    if mmq:  # the sourced INT8 rate, or the named stand-in of device.int8_peak (probe18 D1a)
        gemm_peak, stand_in = int8_peak(device)
        gemm_key = "int8"
        if stand_in is not None and all(a.name != stand_in.name for a in assumptions):
            assumptions.append(stand_in)
    fp16_peak, _ = device.peak_flops("fp16_acc16")
    if gemm_peak is None or fp16_peak is None:
        return E.COMPUTE.expected
    sync = E.llamacpp_sync_mma_share(device.architecture)
    if sync is not None:  # Hopper: warp-level mma.sync reaches half the wgmma peak (efficiency.LLAMACPP_SYNC_MMA_SHARE)
        gemm_peak, fp16_peak = gemm_peak * sync.expected, fp16_peak * sync.expected
        assumptions.append(Assumption(sync.name, sync.expected, True, sync.source))
    cols = float(min(tokens, ubatch))
    experts = 0.0
    expert_cols = cols
    share = routed_share(spec)
    if spec.moe is not None:
        experts = pc.by_component.get("experts", 0) * share
        expert_cols = max(1.0, cols * share)
    t = gemm_time(2.0 * (gemm_params - experts) * tokens, gemm_peak, factor.expected, cols, 0.0)
    tile = E.LLAMACPP_MMQ_TILE_COLUMNS
    if experts and mmq and tile and spec.moe is not None:
        # eq. (9'''): each expert's columns in ceil(m / 128) MMQ tiles, each a full tile's work reading its weights
        tiles, executed = moe_expert_tiles(tokens, ubatch, spec.moe.experts_per_token, spec.moe.num_experts, tile)
        idf = E.LLAMACPP_MMQ_ID
        t += 2.0 * pc.by_component.get("experts", 0) * executed / (gemm_peak * idf.expected)
        t_expert_reads = expert_quantized_bytes * tiles / stream_rate if stream_rate else 0.0
        t += t_expert_reads
        assumptions.append(Assumption(
            "llamacpp_moe_expert_tiles", round(tiles, 3), True,
            f"per expert {tiles:.2f} MMQ tiles of {executed / tiles if tiles else 0:.0f} columns for "
            f"{tokens * share:.0f} routed columns (uniform routing), each "
            f"a full tile's work at {idf.expected} of the {gemm_key} peak ({idf.name}) and a read of the expert's "
            f"weights ({expert_quantized_bytes / 1e9:.2f} GB in all, {t_expert_reads:.4f} s): formulas/speed.py eq. "
            "(9'''), ggml-cuda mmq.cu ggml_cuda_mul_mat_q ncols_max = ne12 and mmq.cuh mul_mat_q (ggml-org/ggml "
            "@da232870); " + idf.source))
    elif experts:
        t += gemm_time(2.0 * experts * tokens, gemm_peak, factor.expected, expert_cols, 0.0)
    if mmq and stream_rate and quantized_bytes > expert_quantized_bytes and E.LLAMACPP_MMQ_TILE_COLUMNS:
        reads = mmq_tile_reads(tokens, ubatch, E.LLAMACPP_MMQ_TILE_COLUMNS)
        t_reads = (quantized_bytes - expert_quantized_bytes) * reads / stream_rate
        t += t_reads
        assumptions.append(Assumption(
            "llamacpp_mmq_tile_weight_reads", reads, True,
            f"the dense products' {(quantized_bytes - expert_quantized_bytes) / 1e9:.2f} GB read once per "
            f"{E.LLAMACPP_MMQ_TILE_COLUMNS}-column tile, {t_reads:.4f} s at {stream_rate / 1e9:.0f} GB/s "
            "(formulas/speed.py eq. 9''; ggml-cuda mmq.cuh get_mmq_x_max_host, ggml-org/ggml @da232870 L94-102)"))
    t += gemm_time(attn_flops, fp16_peak, E.LLAMACPP_CUBLAS.expected, cols, 0.0)
    if not flash_attention and device.bandwidth:
        # without flash attention the scores are materialised (llama-graph.cpp build_attn_mha: kq = mul_mat(k, q)
        # at GGML_PREC_F32, soft_max_ext, kqv = mul_mat(v, kq)): 4 passes of 4 bytes per score through memory
        scores = spec.num_heads * _attended_all_layers(spec, tokens, 0)
        t += E.LLAMACPP_KQ_BYTES_PER_SCORE * scores / (device.bandwidth * E.LLAMACPP_DECODE_BANDWIDTH.expected)
    assumptions.append(Assumption("llamacpp_kernel_path", f"{path} ({gemm_key} peak)", True, factor.source))
    assumptions.append(Assumption(factor.name, factor.expected, True, factor.source))
    assumptions.append(Assumption("llamacpp_ubatch", int(cols), True,
                                  "llama.cpp n_ubatch (common/common.h default 512), capped at the prompt; "
                                  "llama.cpp also caps it at n_batch (2048 by default: a larger --ubatch needs -b "
                                  "raised with it, src/llama-context.cpp)"))
    return flops / (peak * t)


def _moe_ubatch_note(ubatch: int, efficiency: float, one_ubatch_efficiency: float, tokens: int, one: int,
                     peak_seconds: float, assumptions: list[Assumption], warnings: list[str]) -> None:
    """An MoE prefill on llama.cpp's MMQ path split into ubatches of ``ubatch`` < ``tokens``: each ubatch fills its
    own expert tiles and reads every expert's weights again (formulas/speed.py eq. 9'''), so n_ubatch sets the rate.
    The assumption names what the same prompt takes in ubatches of ``one`` (``one_ubatch_efficiency``: the same eq.
    (9) at ubatch = the prompt, at most llama.cpp's default n_batch 2048, which caps n_ubatch); a warning where the split at least doubles the compute time (most of it the ubatches'
    doing), naming --ubatch: llama-bench's published pp rows of MoE models run their own n_ubatch (llama.cpp's
    gpt-oss-120b DGX Spark pp2048 row, PM0093 of docs/accuracy.md, at n_ubatch 2048)."""
    t_now, t_one = peak_seconds / efficiency, peak_seconds / one_ubatch_efficiency
    assumptions.append(Assumption(
        "llamacpp_moe_ubatch_prefill_seconds", f"{t_now:.4g} s in ubatches of {ubatch}; {t_one:.4g} s in "
        + (f"one of {tokens}" if one >= tokens else f"ubatches of {one}"), True, "the MoE prefill's compute at llama.cpp's n_ubatch and with the prompt in one ubatch "
        "(formulas/speed.py eqs. 9, 9''': each ubatch fills its own expert tiles and reads the experts' weights "
        "again); "
        "--ubatch sets it"))
    if t_now >= 2.0 * t_one:
        warnings.append(f"llama.cpp n_ubatch {ubatch} sets this MoE prefill's rate: each of its "
                        f"{-(-tokens // ubatch)} ubatches gives each expert a few columns in whole MMQ tiles and reads "
                        f"its weights again, {t_now:.3g} s against "
                        f"{t_one:.3g} s "
                        + (f"with the {tokens}-token prompt in one ubatch" if one >= tokens else
                           f"in ubatches of {one}, llama.cpp's default n_batch, which caps n_ubatch")
                        + f" (--ubatch {one}, at a larger compute buffer); llama-bench's published MoE pp rows state "
                        "their own n_ubatch")


def _metal_prefill_efficiency(spec: ModelSpec, fmt: str, efficiency: float, flops: float, product_flops: float,
                              assumptions: list[Assumption]) -> float:
    """llama.cpp prefill on Apple silicon (Metal): the ``product_flops`` of the layer stack's matrix products pay the
    dequantization of their weight tiles on the same shader ALUs (formulas/speed.py eq. 9m, w_q per GGML type from
    efficiency.LLAMACPP_METAL_DEQUANT_CYCLES, weighted over the products' tensors of the file type); returned as the
    share of the peak the prefill's ``flops`` reach so that eq. (3) keeps one form. F16 pays nothing (its tiles are
    copied); a type without a count leaves eq. (9m) out, named."""
    ftype = fmt[5:]
    if ftype not in GGUF_FTYPES:
        return efficiency
    mix = gguf_product_weights(spec, ftype)
    total = sum(w for _, w in mix)
    ops_by_type = E.LLAMACPP_METAL_DEQUANT_CYCLES
    missing = [g for g, _ in mix if g not in ops_by_type]
    if missing or total <= 0:
        assumptions.append(Assumption(
            "llamacpp_metal_dequant_share", "not counted", True,
            f"no dequantization count for {', '.join(missing) or 'these products'}: formulas/speed.py eq. (9m) left "
            "out, the products timed as F16's (prefill may be faster than estimated)"))
        return efficiency
    ops = sum(w * ops_by_type[g] for g, w in mix) / total
    share = metal_dequant_share(ops)
    if share <= 0.0:
        return efficiency
    types = ", ".join(f"{g} {w / total:.0%}" for g, w in mix)
    assumptions.append(Assumption(
        "llamacpp_metal_dequant_share", round(share, 4), True,
        f"{ops:.2f} issue cycles per weight ({types} of the products' weights) x 16 weights dequantized per "
        f"32 simdgroup 8x8x8 products of {METAL_SIMDGROUP_MATMUL_CYCLES} cycles per simdgroup: the products take "
        f"{1 + share:.3f} x their F16 time; "
        + E.LLAMACPP_METAL_DEQUANT_SOURCE))
    return efficiency * flops / (flops + product_flops * share)


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
                   attention: str = "sdpa") -> SpeedEstimate:
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
    and writes the score tensor (formulas/hf_cache_traffic.py eqs. H2, H3)."""
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
                       decode_loop=decode_loop, attention=attention)(count, tensor_parallel, concurrency, link_bandwidth,
                                                                nvlink_mesh, False)


SpeedLayout = Callable[[int, int | None, int, float | None, bool | None, bool], SpeedEstimate]


@dataclass(slots=True)
class SpeedSetup:
    """What no layout changes, computed once by ``speed_model``: the workload's arguments, the weight format's
    kernels and bytes, the device's peak, bandwidth and efficiencies, the engine's step, the model's parameters and
    bytes; ``layout_speed`` reads it for every (count, tensor_parallel, concurrency, link) it is asked. Written once,
    by ``speed_model``, never assigned after (only its ``decoded`` and ``layouts`` memos fill). Slots, not frozen:
    a frozen class stores each field through object.__setattr__, and a dict-backed one (frozen.fast_init) builds
    63 fields in ~1.7 us against ~0.5 us here, once per estimate (the branch speedsplit2's report)."""
    spec: ModelSpec
    device: Any
    prompt_tokens: int
    output_tokens: int
    kv_dtype: str
    mla_mode: str
    compute_efficiency: float | None
    identical_sequences: bool
    state_dtypes: tuple[str, str]
    ubatch: int | None
    flash_attention: bool
    kv_unified: bool | None
    engine: str | None
    engine_version: str | None
    allreduce_latency: float | None
    llamacpp_int8_mmq: bool
    group_size: int
    other_bytes: int
    encoder_flops: float
    fmt: str  # the format whose kernels run
    bytes_fmt: str  # the format whose bytes are read
    dtype: str  # the compute dtype (compute_dtype_for)
    act_bytes: int
    peak: float | None
    peak_key: str
    bw: Any  # device.bandwidth
    ce: float  # compute efficiency
    be: float  # bandwidth efficiency, after the SM stream caps
    bw_factor: E.Factor
    kernel_floor: float  # eq. (15)
    step_fixed: float  # a decode step's fixed seconds (eq. 7)
    host_step: float  # the host step a decode step overlaps (eq. 14)
    launch_host: float  # eager transformers: a one-sequence step's launches (eq. K1)
    prefill_host: float  # eager transformers: the prefill forward's launches (eq. K1)
    eager_traffic: E.Factor | None  # eq. E13's memory-bound share, where it applies
    hf_cache: bool  # eqs. H1-H3 apply
    capability: int | None  # device_weights_capability
    pc: ParamCounts
    wb: WeightBytes
    matmul_params: int
    read_bytes: int
    matmul_parts: dict[str, float]
    unread: set[str]
    t5: ED.T5Params | None
    expert_bytes: int
    head_component: str
    head_params: int
    width: int  # attention_width
    repeated_kv: bool
    pre: tuple[Assumption, ...]  # the assumptions before the load's identical_sequences
    post: tuple[Assumption, ...]  # and after it
    settled: tuple[str, ...]  # the warnings no layout changes
    # the decode at a layout's load: (decode, its roofline, the KV and weight bytes it reads), by (count, tp,
    # concurrency, link, nvlink_mesh), everything else being this model's
    decoded: dict[tuple[Any, ...], tuple[PhaseTime | None, Roofline | None, float | None, float | None]]
    path: str | None  # llama.cpp's GEMM path (efficiency.llamacpp_gemm_path)
    llamacpp: bool
    unified: bool  # llama.cpp's unified KV buffer
    ub: int  # llama.cpp's n_ubatch
    repeats: bool  # eq. H2: K/V repeated to every query head
    eager_scores: bool  # eq. H3: eager attention writes the score tensor
    score_layers: int
    decode_loop_kernels: int | None  # eager transformers: the loop's own kernels a step (None: not that path)
    engine_host: float  # eager transformers: the engine's host step its launches overlap
    layouts: dict[int, ENG.LlamaCppKV] = field(default_factory=dict)  # llama.cpp's layout per batch (asked ~3 times)


def llamacpp_identical_routings(batch: int) -> float:
    """Eq. (11): the routings ``batch`` identical prompts diverge to in llama.cpp's batched step."""
    return identical_sequence_routings(batch, E.LLAMACPP_IDENTICAL_ROUTINGS_SCALE.expected,
                                       E.LLAMACPP_IDENTICAL_ROUTINGS_EXPONENT.expected)


def transformers_step_kernels(spec: ModelSpec, act_bytes: int, per_step: int, fmt: str, capability: int | None,
                              rows: int) -> int:
    """Eq. K4: the kernels eager transformers launches for a forward of ``rows`` rows and its loop's own ops."""
    return inference_kernels(spec, half=act_bytes < 4, per_step=per_step, weights_format=fmt, capability=capability,
                             rows=rows)


def _transformers_decode_host(s: SpeedSetup, batch: int) -> float:
    """Eq. K1: a decode step's host seconds at ``batch`` sequences (a bitsandbytes NF4 model's dequantization kernels
    depend on the rows a forward multiplies, eq. K5), overlapping the engine's host step."""
    assert s.decode_loop_kernels is not None
    kernels = transformers_step_kernels(s.spec, s.act_bytes, s.decode_loop_kernels, s.fmt, s.device.capability, batch)
    return max(s.engine_host, host_seconds(kernels, E.HOST_SECONDS_PER_KERNEL.expected))


def _hf_step_bytes(s: SpeedSetup, batch: int, ctx: int, kv: float, tp: int) -> float:
    """Eqs. H1-H3: the decode step's bytes beyond reading its ``kv`` bytes of K/V once."""
    spec = s.spec
    extra = HC.cache_append_bytes(kv)
    if s.repeats:
        extra += HC.repeat_kv_bytes(kv, spec.num_heads, spec.num_kv_heads)
    if s.eager_scores:
        extra += HC.eager_score_bytes(batch, max(spec.num_heads // tp, 1), 1, _attended_all_layers(spec, 1, ctx),
                                      s.act_bytes)
    return extra


def _hf_prefill_bytes(s: SpeedSetup, kv: float, tp: int) -> float:
    """Eqs. H2-H3 over one prompt (eager attention: every score of the s x s matrix, per attention layer)."""
    spec, prompt_tokens = s.spec, s.prompt_tokens
    out = HC.repeat_kv_bytes(kv, spec.num_heads, spec.num_kv_heads) if s.repeats else 0.0
    if s.eager_scores:
        out += s.score_layers * HC.eager_score_bytes(1, max(spec.num_heads // tp, 1), prompt_tokens, prompt_tokens,
                                                     s.act_bytes)
    return out


def _llamacpp_fattn_kernel(s: SpeedSetup, batch: int, per_stream: int, streams: int) -> str | None:
    """The flash-attention kernel ggml-cuda runs for this step (formulas/flash_attention.py fattn_kernel)."""
    spec = s.spec
    capability = s.device.capability
    if not s.flash_attention or capability is None or s.kv_dtype not in _FA_KV_TYPES:
        return None
    cc = capability * 10  # ggml's scale: 8.9 -> 890
    dk, dv, heads_kv = spec.head_dim, spec.head_dim, spec.num_kv_heads
    if spec.mla is not None:  # llama.cpp's MLA cache: one latent "head" of kv_lora_rank + rope, V the latent
        dk, dv, heads_kv = spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim, spec.mla.kv_lora_rank, 1
    tokens = batch // streams if streams else batch  # one unified stream: every sequence's token in it
    return FA.fattn_kernel(dk, spec.num_heads, heads_kv, max(tokens, 1), streams, FA.padded_kv_cells(per_stream),
                           cc, kv_quantized=_FA_KV_TYPES[s.kv_dtype], head_dim_v=dv)


def _llamacpp_cells_at(s: SpeedSetup, batch: int) -> ENG.LlamaCppKV:
    """llama.cpp's KV layout of ``batch`` sequences (engines.llamacpp_kv_cells, the memory estimate's rule), kept per
    batch: a decode step reads the cells in use of each stream, a sliding layer's whole stream once it is full (n_swa
    + n_ubatch cells per sequence, or n_swa x n_seq + n_ubatch in one unified stream), not the window alone; other
    engines read the window."""
    lay = s.layouts.get(batch)
    if lay is None:
        lay = s.layouts[batch] = ENG.llamacpp_kv_cells(s.spec.model_type, s.spec.sliding_window, s.ub, batch,
                                                       s.prompt_tokens + s.output_tokens, s.unified)
    return lay


def _llamacpp_cells_read(s: SpeedSetup, batch: int) -> tuple[str | None, int, int, int]:
    """(flash-attention kernel, cells per stream, streams, cells per stream of a sliding layer) that one decode
    step of ``batch`` sequences reads mid-generation. Where ggml-cuda's flash-attention kernel runs, the K/V view
    is llama.cpp's n_kv, padded to 256 cells (formulas/flash_attention.py padded_kv_cells): one stream reads all
    of it (no KV_max scan, fattn-common.cuh L879; fattn-vec.cuh L239 loops to ne11), several streams stop at the
    end of the 256-cell tile of the last open cell, the same count when the streams are equally long."""
    lay = _llamacpp_cells_at(s, batch)
    ctx = s.prompt_tokens + s.output_tokens // 2
    per_stream, streams = lay.decode_kv(ctx)
    kernel = _llamacpp_fattn_kernel(s, batch, per_stream, streams)
    sliding = lay.sliding_read(s.ub, s.prompt_tokens, s.output_tokens // 2, s.flash_attention) if lay.ring else 0
    if kernel is not None:
        per_stream = min(lay.stream_tokens(), FA.padded_kv_cells(per_stream))
        if lay.ring:
            sliding = min(lay.sliding_cells, FA.padded_kv_cells(sliding))
    return kernel, per_stream, streams, sliding


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
                           warnings: list[str]) -> tuple[float, float]:
    """(a decode step's fixed seconds, the engine's host step it overlaps): ``step_fixed`` plus the engine's
    serial host step (eq. 7), or its overlapped one (eq. 14), from the engine's rule or as given."""
    host_step = 0.0  # the engine's host step when it overlaps the device's (eq. 14)
    if engine is None and engine_version is not None:
        raise InputError(f"an engine version ({engine_version}) needs its engine (vllm or sglang)")
    rule = ENG.step_host(engine, engine_version) if engine is not None else None
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
            warnings.append(f"{rule.versions}: the engine's host time per decode step ({where}) is not established "
                            "by a published measurement and is left out: decode may be slower than estimated"
                            + (", most where the device step is short (small models)" if rule.mode != "serial"
                               else ""))
        elif rule.mode == "serial":
            step_fixed += float(rule.seconds or 0.0)
        else:
            host_step = float(rule.seconds or 0.0)
    return step_fixed, host_step


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
                decode_loop: str = "generate", attention: str = "sdpa") -> SpeedLayout:
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
    step_fixed, host_step = engine_step_seconds_of(engine, engine_version, engine_step_seconds, step_fixed,
                                                   assumptions, warnings)

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
    capability = device_weights_capability(device, engine, spec.model_type)
    wb = file_weight_bytes(spec) if weights_format == "file" else weight_bytes(
        spec, bytes_fmt, group_size, other_bytes, serving_fused_experts(spec, engine, bytes_fmt), engine, capability)
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
                       launch_host, prefill_host, eager_traffic, hf_cache, capability, pc, wb, matmul_params,
                       read_bytes, matmul_parts, unread, t5, expert_bytes, head_component, head_params, width,
                       repeated_kv, pre, post, settled, decoded, path, llamacpp, unified, ub, repeats, eager_scores,
                       score_layers, decode_loop_kernels, engine_host)
    return MethodType(layout_speed, setup)  # a bound method: its call costs less than a partial's (~20 ns)


def llamacpp_unfused_attention(device: Any, fmt: str, concurrency: int, assumptions: list[Assumption],
                               warnings: list[str]) -> tuple[E.Factor | None, float | None]:
    """llama.cpp without flash attention: the factor and the peak FLOP/s of a single-token step's KQ/KQV products
    (formulas/speed.py eq. 13), (None, None) where the backend has none or the device no sourced rate."""
    unfused: E.Factor | None = None
    unfused_peak: float | None = None
    found = E.llamacpp_unfused_attention(fmt, device.kind, device.vendor)
    if found is not None:
        unfused, rate_key = found
        unfused_peak, used_key = device.peak_flops(rate_key)
        sync = E.llamacpp_sync_mma_share(device.architecture) if rate_key == "fp16_acc16" else None
        if unfused_peak is not None and sync is not None:  # the same warp-level kernels as cuBLAS prefill
            unfused_peak *= sync.expected
        if unfused_peak is None:
            unfused = None
            warnings.append(f"{device.id}: no sourced {rate_key} peak; the single-token attention without "
                            "flash attention is timed as its cache read only (formulas/speed.py eq. 13 not "
                            "applied)")
        else:  # the one-sequence step (the decode at b = 1, and the single-stream figure at any concurrency)
            assumptions.append(Assumption(
                unfused.name, unfused.expected, True,
                "formulas/speed.py eq. (13), the one-sequence step"
                + (" (the single-stream figure; the step of several sequences does not use it)"
                   if concurrency > 1 else "")
                + ": without flash attention the one-token KQ/KQV products take "
                f"{unfused.expected} x their FLOPs at the {used_key} peak"
                + (f" x {sync.expected} ({sync.name})" if sync is not None else "") + f"; {unfused.source}"))
    return unfused, unfused_peak


def range_band_assumptions(spec: ModelSpec, device: Any, engine: str | None, engine_version: str | None,
                           llamacpp: bool, launch_host: float, tp: int, concurrency: int,
                           prefill: PhaseTime | None, decode: PhaseTime | None, details: dict[str, Any],
                           assumptions: list[Assumption], warnings: list[str]) -> str | None:
    """Which validation rows calibrate the prefill and decode ranges, and why (estimate/ranges.py): appended to
    ``assumptions``, the keys the bands read written to ``details``; returns the serving engine (None: none)."""
    serving = engine if engine in R.SERVING_ENGINES else None
    if llamacpp and serving is None and not launch_host:  # which llama.cpp band calibrates each range, and why
        backend = llamacpp_backend(device)
        details["llamacpp_backend"] = backend
        for name, kind, value in (("prefill_range_band", R.PREFILL, prefill),
                                  ("decode_range_band", R.BATCHED if concurrency > 1 else R.DECODE, decode)):
            if value is not None:
                b, why = R.llamacpp_band(kind, backend)
                assumptions.append(Assumption(name, b.engine if b else "none", True, why))
    if serving is not None and decode is not None:  # which validation rows calibrate the decode range, and why
        kind = R.BATCHED if concurrency > 1 else R.DECODE
        if spec.mla is not None and spec.moe is not None:  # ranges.MLA_MOE_MULTI_GPU_NO_BAND reads it
            details["mla_moe"] = True
            if decode.bound == "kernel latency":  # eq. 15 decides the step (ranges.MLA_MOE_FLOOR_NO_BAND)
                details["kernel_floor_bound"] = True
        b, why = R.serving_band(kind, serving, engine_version, device.id, tp, bool(details.get("mla_moe")),
                                bool(details.get("kernel_floor_bound")))
        assumptions.append(Assumption("decode_range_band", b.engine if b else "none", True, why))
        if tp > 1 and concurrency == 1 and decode.bound == "host":  # eq. (14): the host floor sets the step
            warnings.append(
                f"decode of one sequence on {tp} GPUs is host-bound: the engine's host step "
                f"({decode.seconds * 1e3:.2f} ms, estimate/engines.py STEP_HOST) decides it, above the modelled "
                f"device step ({max(decode.compute_seconds, decode.memory_seconds) * 1e3:.2f} ms of weights and KV "
                f"+ {decode.comm_seconds * 1e3:.2f} ms of all-reduces); the per-layer latency-bound kernels of a "
                "tensor-parallel step are counted for MLA + MoE layers only (formulas/speed.py eq. 15), so the "
                "step may be slower: no calibrated range")
    return serving


def layout_speed(s: SpeedSetup, count: int, tensor_parallel: int | None, concurrency: int,
                 link_bandwidth: float | None, nvlink_mesh: bool | None, decode_only: bool = False) -> SpeedEstimate:
    """``estimate_speed``'s answer for one layout of the model ``s`` (``speed_model``'s second stage)."""
    spec, device, bw, peak, prompt_tokens = s.spec, s.device, s.bw, s.peak, s.prompt_tokens
    if count < 1 or concurrency < 1:
        raise InputError("count, concurrency and prompt_tokens must be >= 1; output_tokens >= 0")
    tp = tensor_parallel or count
    assumptions = list(s.pre)
    warnings = list(s.settled)
    if spec.moe is not None and (s.identical_sequences or concurrency > 1):
        assumptions.append(Assumption(
            "identical_sequences", s.identical_sequences, not s.identical_sequences,
            ("every sequence carries the same tokens: one routing, or those of eq. (11) in llama.cpp's batched "
             "step (formulas/speed.py)") if s.identical_sequences else
            "distinct prompts: a decode step reads the experts of b independent routings (formulas/speed.py "
            "eq. 5)"))
    assumptions += s.post
    wb_dev = shard_weights(spec, s.wb, tp, s.act_bytes, s.engine, s.group_size,
                           serving_fused_experts(spec, s.engine, s.bytes_fmt), s.other_bytes, s.capability)
    shard = wb_dev.total / s.wb.total if s.wb.total else 1.0
    kv_share = kv_fraction_per_device(spec, tp, s.mla_mode == "latent", s.engine)
    split = activation_split(s.engine, spec.model_type)  # what the engine's TP splits (transformers: its plan)
    attn_ways = split.ways("attention", tp)
    # eq. (TP1): transformers' plan, vLLM's and SGLang's replicated linears keep matrices whole on every rank,
    # which each rank multiplies in full and reads whole (formulas/tensor_parallel.py plan_rank_shares); None:
    # every matrix split tp ways (llama.cpp)
    rank = plan_rank_shares(spec, s.engine, tp) if s.t5 is None and s.wb.by_component else None
    rank_matmul = rank_head = rank_read = rank_experts = 0.0
    if rank is not None:
        rank_matmul = sum(n * rank[c] for c, n in s.matmul_parts.items())
        rank_head = s.head_params * rank.get(s.head_component, 1.0)
        comp = wb_dev.by_component  # the rank's bytes of each component (shard_weights: the plan's shards)
        unread = s.unread  # a local: the generator reads it per component
        rank_read = float(sum(b for c, b in comp.items() if c not in unread))
        rank_experts = float(comp.get("experts", 0))

    def rank_flops(flops: float, attn: float, head: float, tokens: int, enc: float) -> float:
        """A prefill's FLOPs on one rank: ``flops`` (the model's, ``attn`` of them attention's) over tp, or under
        a plan (eq. TP1) the rank's matmul parameters, its heads' attention and its share of the encoder."""
        if rank is None:
            return (flops + enc) / tp
        return prefill_flops(rank_matmul, head, tokens, attn / attn_ways) + enc * rank.get("vision", 1.0)
    kv_read: dict[int, float] = {}  # KV cache bytes one decode step of b sequences reads, by b
    weights_read: dict[int, float] = {}  # weight bytes one device reads in a decode step of b sequences, by b
    # the bandwidth the all-reduces reach: the one rule training's collectives read (device.nvlink_link_bandwidth,
    # formulas/network.py eq. 12 on NVLink), whichever kernel the engine runs
    link, link_share = nvlink_link_bandwidth(device, link_bandwidth) if link_bandwidth else (link_bandwidth, None)
    if tp > 1 and link is None:
        warnings.append(f"no interconnect bandwidth for {count} x {device.id}; tensor-parallel communication "
                        "is not counted")

    # the all-reduce kernel of a decode step of one sequence (engines.tp_allreduce): 2 per layer (row-parallel
    # o_proj and down_proj) and, in vLLM / SGLang, one for the vocabulary-parallel embedding
    if nvlink_mesh is None and tp > 1 and s.engine in ENG.ALLREDUCE_ENGINES + ENG.NCCL_ONLY_ENGINES:
        nvlink_mesh = nvlink_mesh_for(device, None, tp)  # the device's own link (fit passes an instance's)
    p2p = peer_to_peer(device)
    library = "RCCL" if device.vendor == "AMD" else "NCCL"  # ROCm's torch.distributed "nccl" backend is RCCL
    ar_path = ENG.tp_allreduce(s.engine, tp, concurrency * spec.hidden_size * s.act_bytes, nvlink_mesh, p2p, library)
    if s.allreduce_latency is not None and s.allreduce_latency < 0:
        raise InputError("allreduce_latency must not be negative")
    alpha = s.allreduce_latency if s.allreduce_latency is not None else (ar_path.latency.expected if ar_path else 0.0)
    reductions = 2 * spec.num_layers + (1 if ar_path is not None else 0)
    # transformers (tp_plan "auto"): the collectives its plan's styles run, not two all-reduces per layer
    # (formulas/tensor_parallel.py transformers_plan_collectives, eq. TP2)
    plan_comm = transformers_plan_collectives(spec) if s.engine == "transformers" and tp > 1 else None
    if plan_comm is not None and link and not decode_only:
        n_ar = sum(c.kind == "all_reduce" for c in plan_comm)
        sites = sorted({c.site for c in plan_comm if c.layer >= 0})
        assumptions.append(Assumption(
            "tp_allreduce", f"{n_ar} all-reduce{'s' * (n_ar != 1)} + {len(plan_comm) - n_ar} all-gather"
            f"{'s' * (len(plan_comm) - n_ar != 1)} per forward ({library}: "
            f"{alpha * 1e6:.2f} us + bytes / {link / 1e9:.4g} GB/s each)", s.allreduce_latency is None,
            "transformers' tensor-parallel plan (formulas/tensor_parallel.py transformers_plan_collectives, eq. "
            "TP2; transformers 5.24 distributed/tensor_parallel.py): the embedding's all-reduce, per layer one "
            "per row-parallel linear and split experts module"
            + (f" ({', '.join(sites)})" if sites else " (none: the plan splits no layer module)")
            + ", the lm_head's all-gather of the vocabulary (one token per sequence); an image prompt's vision "
            "tower's collectives not counted; each all-reduce by "
            "formulas/speed.py eq. (6), each all-gather by eq. (6g) at the all-reduce's latency (a stand-in: no "
            "published small all-gather timing); "
            + (f"link: {nvlink_link_why(device, link_bandwidth, link_share)}; " if link_share is not None
               and link_bandwidth else "")
            + (f"{ar_path.why}; {ar_path.latency.name} {ar_path.latency.source}"
               if ar_path and s.allreduce_latency is None else "latency given")))
    elif tp > 1 and link and (ar_path is not None or s.allreduce_latency is not None) and not decode_only:
        lat = ar_path.latency if ar_path else None
        assumptions.append(Assumption(
            "tp_allreduce", f"{reductions} x ({ar_path.kernel if ar_path else 'given'}: {alpha * 1e6:.2f} us + "
            f"bytes / {link / 1e9:.4g} GB/s) per step", s.allreduce_latency is None,
            "formulas/speed.py eq. (6) (eq. (6') for the custom one-stage kernel: each GPU reads the whole "
            "message from every peer): 2 all-reduces per layer + 1 for the vocabulary-parallel embedding (a "
            "decode step of the sequences; a prefill's or another batch's larger message picks its own kernel); "
            + (f"link: {nvlink_link_why(device, link_bandwidth, link_share)} (NCCL's figure, taken for the custom "
               "kernel's peer loads too); " if link_share is not None and link_bandwidth else "")
            + (f"{ar_path.why}; {lat.name} {lat.source}" if ar_path and lat and s.allreduce_latency is None
               else "latency given")
            + (f"; {peer_to_peer_why(device)}" if ar_path is not None
               and (ar_path.kernel.startswith("custom") or not p2p) else "")))

    def comm(tokens: int, head_tokens: int) -> float:
        """The collectives of a forward of ``tokens`` tokens (``head_tokens`` of them through the lm_head)."""
        if tp <= 1 or not link:
            return 0.0
        if plan_comm is not None:
            return plan_collective_seconds(plan_comm, tokens, head_tokens, s.act_bytes, tp, link, alpha)
        per_layer = tokens * spec.hidden_size * s.act_bytes
        a, path = alpha, ar_path
        if ar_path is not None and tokens != concurrency:  # the engine's kernel for this message's size
            path = ENG.tp_allreduce(s.engine, tp, per_layer, nvlink_mesh, p2p, library)
            if s.allreduce_latency is None:
                a = path.latency.expected if path else 0.0
        one = path is not None and path.kernel == "custom one-stage"
        return reductions * allreduce_time(per_layer, tp, link, a, one_stage=one)

    # prefill of one prompt (TTFT); the lm_head runs for the last prompt token only (formulas/speed.py eq. 9 note)
    prefill = roof_p = None
    def state_bytes(batch: int) -> float:
        """The recurrent state of ``batch`` sequences on one device (heads split by tensor parallelism where the
        engine splits the mixer: ``activation_split``)."""
        if spec.recurrent is None or not spec.recurrent_layer_count:
            return 0.0  # recurrent_state's 0 bytes, / tp
        conv_b, ssm_b = (DTYPE_BYTES[d] for d in s.state_dtypes)
        ways = split.ways("mixer", tp)
        if s.engine in HEAD_REPLICATING_ENGINES and ways > 1:  # vLLM / SGLang: each shard with its replicated
            # Mamba-2 groups (formulas/recurrent_state.py eq. 4, the one rule extra_groups)
            return batch * spec.recurrent_layer_count * layer_state_bytes_per_device(spec, ways, conv_b, ssm_b)
        return recurrent_state(spec, batch, conv_b, ssm_b).total_bytes / ways

    if not decode_only:  # fit's ranking times the decode alone
        p_attn = _attention_flops_step(spec, s.width, prompt_tokens, 0)
        p_flops = prefill_flops(s.matmul_params, s.head_params, prompt_tokens, p_attn)  # eq. (2'): head on the last
        if s.t5 is not None:  # eq. (S7): the encoder over the source, the cross k/v projections, the first
            # target token
            p_flops = ED.encoder_flops(spec, 1, prompt_tokens) + ED.decode_step_flops(spec, 1, prompt_tokens, 1)
        prefill_path = E.llamacpp_gemm_path(s.fmt, device.kind, device.vendor, s.llamacpp_int8_mmq,
                                            device.capability / 10 if device.capability is not None else None)
        ce_p = s.ce
        if prefill_path is not None and peak is not None and s.compute_efficiency is None:
            head_bytes = s.wb.by_component.get("embedding" if spec.tie_word_embeddings else "lm_head", 0)
            gemm_params = s.matmul_params - s.head_params
            if prefill_path != s.path and s.llamacpp_int8_mmq:  # Volta: no INT8 MMA (efficiency._TURING_CAPABILITY)
                assumptions.append(Assumption(
                    "llamacpp_prefill_path", prefill_path, True,
                    f"{device.id} (compute capability {device.capability / 10 if device.capability else 0:.1f}) "
                    "has FP16 tensor cores and no INT8 MMA: ggml_cuda_should_use_mmq runs a quantized product "
                    "of 64 columns or more through F16 cuBLAS (ggml-org/llama.cpp ggml/src/ggml-cuda/mmq.cu "
                    "@027ef876 L295-309)"))
            elif prefill_path != s.path:
                assumptions.append(Assumption(
                    "llamacpp_int8_mmq", False, False, "given: a llama.cpp build from before "
                    + E.LLAMACPP_INT8_MMQ_SINCE + " (quantized prefill products dequantized to F16 for cuBLAS)"))
            ce_p = _llamacpp_prefill_efficiency(spec, device, prefill_path, s.pc, gemm_params, prompt_tokens,
                                              s.ubatch or ENG.LLAMACPP_N_UBATCH, p_flops, p_attn, peak, assumptions,
                                              flash_attention=s.flash_attention,
                                              quantized_bytes=s.read_bytes - head_bytes,
                                              expert_quantized_bytes=float(s.expert_bytes)
                                              if spec.moe is not None else 0.0,
                                              stream_rate=bw * s.be if bw else None)
            moe_ub = s.ubatch or ENG.LLAMACPP_N_UBATCH
            # the largest ubatch llama.cpp runs at its default n_batch: it takes n_ubatch = min(n_batch,
            # n_ubatch) (src/llama-context.cpp, llama_context's constructor), n_batch 2048 by default (review22 D4)
            one = min(prompt_tokens, ENG.LLAMACPP_N_BATCH)
            if spec.moe is not None and prefill_path == E.MMQ_PATH and moe_ub < one:
                _moe_ubatch_note(moe_ub, ce_p, _llamacpp_prefill_efficiency(
                    spec, device, prefill_path, s.pc, gemm_params, prompt_tokens, one, p_flops, p_attn,
                    peak, [], flash_attention=s.flash_attention, quantized_bytes=s.read_bytes - head_bytes,
                    expert_quantized_bytes=float(s.expert_bytes), stream_rate=bw * s.be if bw else None),
                    prompt_tokens, one, p_flops / peak, assumptions, warnings)
        elif s.llamacpp and device.kind == "cpu" and peak is not None:
            kernel, kernel_src = E.llamacpp_cpu_kernel(s.fmt)
            assumptions.append(Assumption(
                "llamacpp_cpu_kernel", kernel, True,
                f"timed at the {s.peak_key} FMA peak, {peak / 1e12:.3g} TFLOP/s ({kernel_src})"))
        elif s.llamacpp and device.kind == "apple" and peak is not None \
                and s.compute_efficiency is None:
            ce_p = _metal_prefill_efficiency(spec, s.fmt, s.ce, p_flops, prefill_flops(
                s.matmul_params, s.head_params, prompt_tokens, logit_tokens=0), assumptions)

        kv_p = kv_cache(spec, prompt_tokens, 1, s.kv_dtype, mla_mode=s.mla_mode, window_extra=0,
                        repeated_kv=s.repeated_kv).total_bytes * kv_share
        p_bytes = (s.read_bytes * shard if rank is None else rank_read) + kv_p + state_bytes(1)
        if s.t5 is not None:  # every weight once, and the cross K/V written
            p_bytes = s.wb.total + cross_attention_kv(spec, prompt_tokens, 1, s.kv_dtype)
        # the vision encoder runs first, its products at the compute efficiency of the dtype's peak (ce), not a
        # llama.cpp quantized-kernel rate (ce_p): its FLOPs enter eq. (3) scaled to take ce's time at ce_p, and
        # its weights (left out of read_bytes) are read once
        enc_flops = s.encoder_flops * ce_p / s.ce if s.encoder_flops else 0.0
        if s.encoder_flops:
            p_bytes += s.wb.by_component.get("vision", 0) * shard if rank is None else wb_dev.by_component.get(
                "vision", 0)
            assumptions.append(Assumption(
                "vision_encoder_flops", f"{s.encoder_flops:.3g}", False,
                "the vision encoder over one prompt's images/video, before the language model's prefill and "
                f"part of the TTFT, at compute efficiency {s.ce:g} (formulas/vision_compute.py eqs. V1-V4)"))
        t_ew = 0.0
        if s.eager_traffic is not None and s.t5 is None and bw:
            # eq. E13: eager transformers runs the norms, rotary, SwiGLU, residual adds and the cache append as
            # kernels of their own between the GEMMs; the append writes the prompt's K/V (out of p_bytes)
            per_token = inference_forward_bytes_per_token(spec, s.act_bytes, tp, split)
            scores = _hf_prefill_bytes(s, kv_p, attn_ways)  # eager attention only (eqs. H2, H3)
            t_ew = elementwise_seconds(prompt_tokens * per_token + scores, bw, s.eager_traffic.expected)
            p_bytes -= kv_p
            assumptions.append(Assumption(
                "prefill_elementwise_bytes_per_token", round(per_token), True,
                f"formulas/elementwise_traffic.py eq. (E13): the eager forward's norms (fp32), rotary, activation, "
                f"residual adds, cache append, embedding and final norm, {t_ew * 1e3:.2f} ms a prompt at "
                f"{s.eager_traffic.expected} of the memory bandwidth ({s.eager_traffic.name}), after the GEMMs "
                f"(formulas/speed.py eq. 3'); {SOURCE_EAGER}"))
        if peak is not None or bw is not None:
            prefill = phase_time(rank_flops(p_flops, p_attn, rank_head, prompt_tokens, enc_flops), p_bytes, peak,
                                 bw, ce_p, s.be, comm(prompt_tokens, 1), elementwise_seconds=t_ew)
            if s.prefill_host:  # eq. K1: the forward's launches overlap its device work
                prefill = host_overlapped_step(prefill, s.prefill_host)
            if peak and bw:
                roof_p = phase_roofline(rank_flops(p_flops, p_attn, rank_head, prompt_tokens, s.encoder_flops),
                                        p_bytes, prefill, peak, bw)

    def _fattn_assumptions(kernel: str, batch: int, unified: bool) -> None:
        fa = E.LLAMACPP_FA_STREAM_SHARE
        assumptions.append(Assumption(
            "llamacpp_fattn_kernel", kernel, True,
            "ggml-cuda fattn.cu ggml_cuda_get_best_fattn_kernel L199-326 (ggml-org/ggml @7b6abb2) for "
            f"head size {spec.head_dim}, {spec.num_heads}/{spec.num_kv_heads} heads, "
            + ("one stream of one token" if batch == 1 else f"{batch} streams of one token" if not unified
               else f"one stream of {batch} tokens")
            + "; the K/V view padded to 256 cells (formulas/flash_attention.py)"))
        assumptions.append(Assumption(fa.name, fa.expected, True, fa.source + " (formulas/flash_attention.py "
                                      "eq. F1: the K/V cells at this share of the weight stream's rate)"))

    def _llamacpp_batched(batch: int, attn: float, nbytes: float, kv: float, kernel: str | None) -> PhaseTime:
        """Eq. (10) of formulas/speed.py: llama.cpp on an NVIDIA GPU decoding ``batch`` sequences at once; ``kv`` of
        ``nbytes`` are the K/V cells, streamed by the flash-attention ``kernel`` (None: no flash attention)."""
        mmq = s.path == E.MMQ_PATH
        factor = E.LLAMACPP_MMQ_STEP if mmq else E.LLAMACPP_CUBLAS
        # device.int8_peak: the one INT8 rule (its stand-in named by the prefill)
        gemm_peak, gemm_key = (int8_peak(device)[0], "int8") if mmq else device.peak_flops("fp16_acc16")
        fp16_peak, _ = device.peak_flops("fp16_acc16")
        if gemm_peak is None or fp16_peak is None:  # no tensor rate: the products at the dtype's peak
            gemm_peak = fp16_peak = peak
        sync = E.llamacpp_sync_mma_share(device.architecture)
        if sync is not None and gemm_peak is not None and fp16_peak is not None:  # the same kernels as prefill
            gemm_peak, fp16_peak = gemm_peak * sync.expected, fp16_peak * sync.expected
        if batch == concurrency:
            assumptions.append(Assumption(
                "llamacpp_batched_decode", f"{batch} sequences: weights once, every sequence's KV, products at "
                f"{s.path} ({gemm_key} peak x {factor.expected}) beyond the first column, attention at the FP16 rate"
                + (" over the whole unified buffer" if s.unified else "")
                + (f"; both rates x {sync.expected} ({sync.name})" if sync is not None else ""),
                True, "formulas/speed.py eq. (10): ggml-cuda mmvq.cu/mmq.cu, "
                + ("one unified KV stream: each query computes over every sequence's cells (llama.cpp PR "
                   "#14363; no published -kvu measurement checks this case yet)"
                   if s.unified else "one KV stream per sequence (llama.cpp PR #14363)") + "; " + factor.source))
            if spec.moe is not None and s.identical_sequences:
                assumptions.append(Assumption(
                    "identical_sequences_routing", round(llamacpp_identical_routings(batch), 2), True,
                    f"identical prompts diverge in llama.cpp's batched step: {batch} sequences read the experts of "
                    f"{E.LLAMACPP_IDENTICAL_ROUTINGS_SCALE.expected} "
                    f"b^{E.LLAMACPP_IDENTICAL_ROUTINGS_EXPONENT.expected}"
                    " routings (formulas/speed.py eq. 11; " + E.LLAMACPP_IDENTICAL_ROUTINGS_SCALE.source + ")"))
            g = E.LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU
            assumptions.append(Assumption(g.name, g.expected, True, g.source))
        extra = decode_flops(s.matmul_params, batch - 1) / tp  # eq. (1') beyond the first column
        # b >= 2: no CUDA graph, no single-column fusion (efficiency.LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU)
        graphs_off = step_overhead(spec.num_layers, E.LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU.expected)
        share = E.LLAMACPP_FA_STREAM_SHARE.expected if kernel is not None else 1.0
        assert gemm_peak is not None and fp16_peak is not None  # float(None) failed here before: no new case
        return batched_decode_time(nbytes, float(bw), s.be, extra, float(gemm_peak), factor.expected, attn,
                                   float(fp16_peak), E.LLAMACPP_CUBLAS.expected, comm(batch, batch),
                                   s.step_fixed + graphs_off,
                                   kv_bytes=kv if kernel is not None else 0.0, kv_share=share)

    if s.llamacpp:
        lay = _llamacpp_cells_at(s, concurrency)
        assumptions.append(Assumption("kv_unified", s.unified, s.kv_unified is None, ENG.LLAMACPP_KV_UNIFIED_SOURCE))
        if spec.sliding_window:
            scan = lay.ring and s.flash_attention and not s.unified and concurrency > 1
            fa_kernel, _, _, ring_read = _llamacpp_cells_read(s, concurrency)
            shown = ring_read if lay.ring else lay.sliding_read(s.ub, prompt_tokens, s.output_tokens // 2,
                                                                s.flash_attention)
            assumptions.append(Assumption(
                "llamacpp_sliding_cells_read", shown, True,
                "llama.cpp iSWA cache, cells a decode step reads per " + ("unified stream: min(context x n_seq, "
                "pad256(n_swa x n_seq + n_ubatch))" if s.unified else "sequence's stream: min(context, pad256(n_swa "
                "+ n_ubatch))") + " (src/llama-kv-cache-iswa.cpp:69-73 size_swa; engines.llamacpp_kv_cells)"
                + ("; ggml-cuda's flash attention reads the view padded to 256 cells (src/llama-kv-cache.cpp "
                   "get_n_kv)" if fa_kernel is not None else "")
                + ("; flash attention with a stream per sequence stops after the 256-cell tile of the ring's last "
                   "in-window cell (ggml-cuda fattn-common.cuh:879 KV_max; engines.LLAMACPP_FA_KV_TILE)"
                   if scan else "")))

    # llama.cpp without flash attention: a single-token step's KQ/KQV products (formulas/speed.py eq. 13)
    unfused: E.Factor | None = None
    unfused_peak: float | None = None
    if s.llamacpp and not s.flash_attention:
        unfused, unfused_peak = llamacpp_unfused_attention(device, s.fmt, concurrency, assumptions, warnings)

    def decode_at(batch: int) -> tuple[PhaseTime | None, Roofline | None]:
        ctx = prompt_tokens + s.output_tokens // 2
        if s.t5 is not None:  # eq. (S7) mid-generation: target/2 tokens of self K/V, the source's cross K/V
            return _t5_decode(batch)
        # one unified llama.cpp stream: each query's attention runs over every sequence's cells (masked, not
        # skipped)
        attn = batch * _attention_flops_step(spec, s.width, 1, ctx) / attn_ways
        if s.llamacpp:
            attn *= _llamacpp_cells_at(s, batch).cross_sequence_attention
        flops = decode_flops(s.matmul_params, batch) / tp + attn if rank is None else decode_flops(  # eq. (1')
            rank_matmul, batch, attn)
        w = float(s.read_bytes)
        if spec.moe is not None and s.expert_bytes:
            # distinct sequences: b routings (eq. 5); identical ones: one routing, except in llama.cpp's batched
            # step, where they diverge to the routings of eq. (11)
            routings: float = float(batch)
            if s.identical_sequences:
                routings = llamacpp_identical_routings(batch) if s.path is not None and batch > 1 else 1.0
            frac = moe_expert_fraction(spec.moe.experts_per_token, spec.moe.num_experts, routings)
            w = s.read_bytes - s.expert_bytes + s.expert_bytes * frac
            if rank is not None:  # the rank's shards (eq. TP1), its routed experts' share read
                w = rank_read - rank_experts + rank_experts * frac
        elif rank is not None:
            w = rank_read
        kernel = None
        if s.llamacpp:
            lay = _llamacpp_cells_at(s, batch)
            kernel, per_stream, streams, sliding = _llamacpp_cells_read(s, batch)
            if kernel is not None and batch == concurrency:
                _fattn_assumptions(kernel, batch, s.unified)
            extra = lay.window_extra
            if lay.ring:  # the ring's cells a step reads (the flash-attention mask scan with several streams)
                extra = sliding - lay.window
            kv = kv_cache(spec, per_stream, streams, s.kv_dtype, mla_mode=s.mla_mode,
                          window_extra=extra, repeated_kv=s.repeated_kv).total_bytes * kv_share
        else:
            kv = kv_cache(spec, ctx, batch, s.kv_dtype, mla_mode=s.mla_mode, window_extra=0,
                          repeated_kv=s.repeated_kv).total_bytes * kv_share
        kv_read[batch] = kv
        w_dev = w * shard if rank is None else w
        weights_read[batch] = w_dev
        hf = _hf_step_bytes(s, batch, ctx, kv, attn_ways) if s.hf_cache else 0.0
        # a recurrent layer reads its state and writes it back once per token (Gu & Dao 2023, section 3.3)
        nbytes = w_dev + kv + 2 * state_bytes(batch) + hf
        if peak is None and bw is None:
            return None, None
        if s.path is not None and batch > 1 and bw and peak and s.compute_efficiency is None:
            tb = _llamacpp_batched(batch, attn, nbytes, kv, kernel)
            return tb, phase_roofline(flops, nbytes, tb, peak, bw)
        t_attn = 0.0
        if kernel is not None and bw:
            # eq. F1: the flash-attention kernel streams the K/V cells at a share of the weight stream's rate
            # (efficiency.LLAMACPP_FA_STREAM_SHARE), after the weight products
            t_attn = FA.fattn_stream_seconds(kv, float(bw), s.be, E.LLAMACPP_FA_STREAM_SHARE.expected)
            nbytes -= kv
        elif unfused is not None and batch == 1 and bw and unfused_peak:
            # eq. (13): without flash attention the one-token KQ/KQV products read the cache inside kernels whose
            # cost follows their arithmetic (efficiency.LLAMACPP_UNFUSED_ATTENTION_WORK_*)
            t_attn = unfused_attention_time(kv, float(bw), s.be, attn, unfused_peak, unfused.expected)
            nbytes -= kv
        t = phase_time(flops, nbytes, peak, bw, s.ce, s.be, comm(batch, batch), s.step_fixed, attention_seconds=t_attn,
                       floor_seconds=s.kernel_floor)
        hs = _transformers_decode_host(s, batch) if s.decode_loop_kernels is not None else s.host_step
        if hs:  # eq. (14): the engine's host step overlaps the device's
            t = host_overlapped_step(t, hs)
        r = phase_roofline(flops, nbytes + (kv if t_attn else 0.0), t, peak, bw) if peak and bw else None
        return t, r

    def _t5_decode(batch: int) -> tuple[PhaseTime | None, Roofline | None]:
        target = s.output_tokens // 2
        flops = ED.decode_step_flops(spec, batch, prompt_tokens, target)
        kv = (kv_cache(spec, target, batch, s.kv_dtype).total_bytes
              + cross_attention_kv(spec, prompt_tokens, batch, s.kv_dtype))
        kv_read[batch] = kv
        nbytes = s.read_bytes + kv
        if peak is None and bw is None:
            return None, None
        t = phase_time(flops, nbytes, peak, bw, s.ce, s.be, 0.0, s.step_fixed)
        if s.host_step:
            t = host_overlapped_step(t, s.host_step)
        return t, (phase_roofline(flops, nbytes, t, peak, bw) if peak and bw else None)

    # fit's ranking decoded this layout already (one speed_model per fit; not llama.cpp, whose decode_at also
    # writes assumptions)
    key = (count, tp, concurrency, link_bandwidth, nvlink_mesh)
    done = s.decoded.get(key) if not s.llamacpp else None
    if done is None:
        done = (*decode_at(concurrency), kv_read.get(concurrency), weights_read.get(concurrency))
        if not s.llamacpp:
            s.decoded[key] = done
    else:
        if done[2] is not None:
            kv_read[concurrency] = done[2]
        if done[3] is not None:
            weights_read[concurrency] = done[3]
    decode, roof_d = done[0], done[1]
    if s.launch_host and tp > 1:
        warnings.append(f"transformers tensor parallel ({tp} devices): each device launches the same kernels (eq. "
                        "K4 counts one device's) plus the launches of its tensor-parallel plan's collectives (the "
                        "all-reduces and all-gathers the tp_allreduce assumption times), which the count leaves "
                        "out: the host time per step is under-stated")
    if s.launch_host and s.output_tokens and decode is not None and decode.bound == "host":  # only when decoding
        warnings.append(f"decode is host-bound: eager transformers launches each decode step's kernels from "
                        f"Python ({s.launch_host * 1e3:.1f} ms a step against {decode.compute_seconds * 1e3:.2f} / "
                        f"{decode.memory_seconds * 1e3:.2f} ms of device compute / memory time; "
                        "formulas/launch_overhead.py eqs. K1, K4); CUDA graphs (a static cache with "
                        "torch.compile) or a serving engine remove most of it")
    if s.output_tokens == 0:  # prefill only (embeddings, scoring): no token is decoded, no decode step is timed
        decode = roof_d = None
    if decode_only:  # the same decode as the full answer's, nothing else
        return SpeedEstimate(spec.name, device.id, count, tp, s.bytes_fmt, s.dtype, prompt_tokens, s.output_tokens,
                             concurrency, None, decode if bw is not None else None, None, None, None)
    single, _ = decode_at(1) if concurrency > 1 and decode is not None else (decode, roof_d)
    if bw is None:  # a compute-only decode time would be wildly optimistic
        decode = single = None
        roof_d = None
    if peak is None:
        prefill = None
        roof_p = None
    details = {"params_active": s.pc.active, "matmul_params": s.matmul_params, "weights_bytes": s.wb.total,
               "weights_bytes_per_device": wb_dev.total, "attention_width": s.width, "peak_flops": peak,
               "peak_key": s.peak_key, "bandwidth": bw, "prefill_flops": p_flops,
               "bandwidth_factor": s.bw_factor.name, "link_bandwidth": link_bandwidth, "allreduce_bandwidth": link,
               "decode_overhead_seconds": s.step_fixed, "host_step_seconds": s.host_step,
               "kv_bytes_per_decode_step": kv_read.get(concurrency),
               "weight_bytes_per_decode_step": weights_read.get(concurrency),
               "prefill_flops_per_device": rank_flops(p_flops, p_attn, rank_head, prompt_tokens, s.encoder_flops)}
    if s.t5 is not None:
        details["decode_read_weight_bytes"] = s.read_bytes
    if plan_comm is not None:  # eq. TP2's collectives per forward (their seconds: each phase's comm_seconds)
        details["tp_plan_collectives"] = {k: sum(c.kind == k for c in plan_comm) for k in ("all_reduce",
                                                                                           "all_gather")}
    if spec.recurrent_layer_count:
        details["recurrent_state_bytes_per_decode_step"] = 2 * state_bytes(concurrency)
        details["state_dtypes"] = list(s.state_dtypes)
    serving = range_band_assumptions(spec, device, s.engine, s.engine_version, s.llamacpp, s.launch_host, tp, concurrency,
                                     prefill, decode, details, assumptions, warnings)
    return SpeedEstimate(spec.name, device.id, count, tp, s.bytes_fmt, s.dtype, prompt_tokens, s.output_tokens,
                         concurrency, prefill, decode, single, roof_p, roof_d, tuple(assumptions), tuple(warnings),
                         details, serving, s.engine_version, R.TRANSFORMERS if s.launch_host else None,
                         s.engine == "transformers")



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
