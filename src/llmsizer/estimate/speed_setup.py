"""The records ``speed_model``'s stages pass: ``SpeedSetup``, what no layout changes (built once by
``speed.speed_model``), and, per layout ``speed_layout.layout_speed`` times, its ``Collectives`` and ``Layout``
(the devices' shares, the collectives, what the decode steps record). Data only: no arithmetic."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..formulas import encoder_decoder_serving as ED
from ..formulas.params import ParamCounts
from ..formulas.speed import PhaseTime, Roofline
from ..formulas.tensor_parallel import ActivationSplit, PlanCollective
from ..formulas.weight_formats import WeightBytes
from ..result import Assumption
from ..specs import ModelSpec
from . import efficiency as E
from . import engines as ENG


@dataclass(slots=True)
class SpeedSetup:
    """What no layout changes, computed once by ``speed_model``: the workload's arguments, the weight format's
    kernels and bytes, the device's peak, bandwidth and efficiencies, the engine's step, the model's parameters and
    bytes; ``layout_speed`` reads it for every (count, tensor_parallel, concurrency, link) it is asked. Written once,
    by ``speed_model``, never assigned after (only its ``decoded`` and ``layouts`` memos fill). Slots, not frozen:
    a frozen class stores each field through object.__setattr__, and a dict-backed one (frozen.fast_init) builds
    63 fields in ~1.7 us against ~0.5 us here, once per estimate."""
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
    mx_read: int  # vLLM MXFP4: eq. X4's extra bytes in wb's experts, at tensor parallel 1 (0 elsewhere)
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
    # a release whose host step is not established but bounded: (its mode, the seconds the decode range's slow end
    # takes), engines.StepHost.range_seconds; None elsewhere
    host_range: tuple[str, float] | None
    layouts: dict[int, ENG.LlamaCppKV] = field(default_factory=dict)  # llama.cpp's layout per batch (asked ~3 times)


@dataclass(frozen=True)
class MachineNetwork:
    """The network a tensor-parallel group crosses: the ``machines`` it spans (> 1) and each machine's network
    ``bandwidth`` [B/s] (an instance's catalog network), ``what`` naming it; formulas/network.py eqs. (11), (13')."""
    machines: int
    bandwidth: float
    what: str


@dataclass(slots=True)
class Collectives:
    """One layout's tensor-parallel collectives: the link they reach, the all-reduce kernel a decode step's message
    picks (engines.tp_allreduce) and its latency, or transformers' plan (formulas/tensor_parallel.py eq. TP2).
    Built by ``layout_collectives``, read by ``collective_seconds``."""
    tp: int
    concurrency: int  # the sequences of the decode step whose message picked ``ar_path``
    link: float | None  # bytes/s the all-reduces reach (None or 0: not counted)
    link_share: Any  # nvlink_link_bandwidth's share (None: the link given as is)
    nvlink_mesh: bool | None
    p2p: bool  # peer_to_peer(device)
    library: str  # NCCL or RCCL
    ar_path: ENG.AllReducePath | None  # the kernel of a decode step's all-reduce (None: not covered)
    alpha: float  # an all-reduce's latency, seconds
    reductions: int  # all-reduces per forward: 2 per layer + 1 for the vocabulary-parallel embedding
    plan_comm: tuple[PlanCollective, ...] | None  # transformers' plan's collectives (None: not that engine)
    network: MachineNetwork | None = None  # the machines the group spans (None: one machine, or none known)
    intra_link: float | None = None  # the in-machine figure ``link`` was bounded from (eq. 11), across machines


@dataclass(slots=True)
class Layout:
    """What one layout (count, tensor_parallel, concurrency, link) fixes for every phase ``layout_speed`` times:
    each device's shares of the weights, K/V and attention, a plan's rank shares (eq. TP1), the collectives, and
    what the decode steps record (their K/V and weight bytes by batch, their assumptions). Built by ``layout_speed``
    for each call, never kept."""
    tp: int
    concurrency: int
    kv_share: float  # kv_fraction_per_device
    shard: float  # the device's share of the weights' bytes
    split: ActivationSplit  # what the engine's TP splits (transformers: its plan)
    attn_ways: int  # split.ways("attention", tp)
    rank: dict[str, float] | None  # eq. TP1's shares per component (None: every matrix split tp ways)
    rank_matmul: float  # the rank's matmul parameters (0 where rank is None)
    rank_head: float  # the rank's lm_head parameters
    rank_read: float  # the rank's bytes a decode step reads
    rank_experts: float  # the rank's routed experts' bytes
    comm: Collectives
    kv_read: dict[int, float]  # KV cache bytes one decode step of b sequences reads, by b
    weights_read: dict[int, float]  # weight bytes one device reads in a decode step of b sequences, by b
    assumptions: list[Assumption]
    # data-parallel ranks whose tokens each device's routed experts run (formulas/serving_expert_parallel.py eq. EP4:
    # the MoE layer gathers them), and the share of the E routed experts it holds whole (eq. EP2; 1: each expert
    # tensor-parallel, every device a shard of all of them)
    routing_ranks: int = 1
    experts_held: float = 1.0
    # the routed experts' bytes a device holds against the layout's own 1 / tp of them (eqs. EP1-EP2 x tp; 1: no
    # data parallelism), read where no plan gives the rank's shards (tp 1)
    expert_scale: float = 1.0
    # the weight bytes a device holds, and so does not read, below its attention-TP group's share where SGLang's
    # attention DP splits the dense MLPs, shared experts and lm_head over the whole TP group (formulas/
    # serving_expert_parallel.py eq. EP1s), read where no plan gives the rank's shards (tp 1)
    read_less: float = 0.0
