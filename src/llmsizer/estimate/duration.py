"""How long a training run takes on a device: the one rule for ``train``, ``fit --train``, ``recommend --train``
and ``plan``.

FLOPs per token by method (formulas/training_time.py: eqs. (1)-(2) full, (4)-(5) adapters), recomputation from
the gradient-checkpointing setting (whole layers, eq. (2'), or torchtitan's op-level policy, eq. (2''), on every
checkpointed layer), the device's dense peak for the compute dtype at the achieved utilisation of the executed FLOPs
(efficiency.TRAINING_DEVICE_UTILIZATION) times the shape efficiency of the step's GEMMs (formulas/gemm_shapes.py
eq. (4): roofline and tile quantization of each forward, input-gradient and weight-gradient GEMM), QLoRA's
dequantization passes (eq. (9)), the memory-bound norm / rotary / activation / residual / loss kernels, eager or
compiled (formulas/elementwise_traffic.py eq. (E7)), the optimizer update and gradient accumulation of each step
(formulas/optimizer_step.py), data-parallel communication over the interconnect and paged-optimizer traffic over
the host link (eqs. (6)-(8)); tensor/pipeline-parallel runs take the same utilisation on each device's share of
the GEMMs (hidden / tp) and add the tensor-parallel collectives, the pipeline's point-to-point transfers and bubble
and the gradient all-reduce between replicas, or FSDP's all-gathers and reduce-scatters of each device's
tensor-parallel shard of its stage (eq. (P7), payloads from ``fsdp_volume`` per stage) (formulas/model_parallel_time.py,
``model_parallel.py`` here). The
calibrated range of the result: estimate/ranges.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from typing import Any

from ..catalog.hardware import Device, Instance
from ..errors import InputError
from ..formulas.activation_offload import STREAM_SOURCE as OFFLOAD_STREAM_SOURCE
from ..formulas.activation_offload import offload_step_seconds
from ..formulas.attention_mask import FLEX_BLOCK, flex_pairs, mean_attended
from ..formulas.context_parallel import SOURCE as CP_SOURCE
from ..formulas.context_parallel import (
    TE_CP_SOURCE,
    ULYSSES_SOURCE,
    local_tokens,
    p2p_ring_exchange_bytes,
    ring_exchange_bytes,
    ring_exposed_seconds,
    ulysses_exchange_bytes,
    ulysses_kv_width,
)
from ..formulas.cost import run_cost
from ..formulas.cpu_offload_time import SOURCE as OFFLOAD_SOURCE
from ..formulas.cpu_offload_time import host_link_traffic, host_step_seconds, offloaded_comm
from ..formulas.deepspeed_zero import (
    MAX_REUSE_DISTANCE,
    PARAM_PERSISTENCE_THRESHOLD,
    PREFETCH_BUCKET_SIZE,
    Zero3Volume,
)
from ..formulas.eager_attention_traffic import eager_attention_bytes_per_token, score_gemm_seconds_per_token
from ..formulas.elementwise_traffic import (
    SOURCE_COMPILED,
    SOURCE_EAGER,
    LayerWidths,
    elementwise_seconds,
    sequence_parallel_copy_bytes,
    step_bytes_per_token,
)
from ..formulas.expert_parallel_time import (
    expert_parallel_exchange,
    exposed_seconds,
    machine_shares,
    paired_exposed_seconds,
    unpaired_microbatches,
)
from ..formulas.float8_training import (
    FLOAT8_BYTES,
    TE_MXFP8,
    TE_RECIPES,
    TORCHAO_RECIPES,
    float8_cast_bytes,
    float8_gathered_element_bytes,
    float8_gathers_in_float8,
    float8_gemms,
    float8_layer_flops,
    float8_weight_elements,
    layer_linears,
    norm_fed_inputs,
    shared_inputs,
    te_weight_casts_per_step,
)
from ..formulas.float8_training import SOURCE_TIME as FLOAT8_TIME_SOURCE
from ..formulas.gemm_shapes import (
    TE_GROUPED_GEMM_STREAMS,
    arithmetic_intensity,
    block_shape_efficiency,
    expert_rows,
    gemm_efficiency,
    grouped_wave_efficiency,
    occupied_experts,
    running_sum,
    tally,
    training_gemms,
)
from ..formulas.launch_overhead import (
    BNB_SERVING_RELEASE,
    GPTQ_KERNEL_SWITCH_ROWS,
    MEGATRON_DISPATCH_SYNC,
    PEFT_4BIT_CLONE_KERNELS,
    LayerCode,
    Linear,
    StreamBlock,
    adapter_cast_kernels,
    gptq_linear_kernels,
    head_kernels,
    host_seconds,
    interleaved_block,
    layer_gemm_kernels,
    layer_kernels,
    megatron_expert_gemm_kernels,
    megatron_layer_blocks,
    moe_dispatch_syncs,
    nf4_fused_max_rows,
    nf4_linear_kernels,
    overlapped_block,
    overlapped_seconds,
    step_kernels,
    synced_micro_step_seconds,
)
from ..formulas.launch_overhead import SOURCE as LAUNCH_SOURCE
from ..formulas.liger_kernels import LIGER_RELEASE, flce_weight_grad_bytes, modules_note, swiglu_applies
from ..formulas.lora import AdaptedModule, adapted_layout, adapted_roles, expert_adapter_work, lora_params
from ..formulas.model_parallel_time import ModelParallelStep
from ..formulas.moe_router import unfused_routing_extra
from ..formulas.network import device_share_of_node_bandwidth, ring_bus_bandwidth
from ..formulas.optimizer_step import (
    accumulation_bytes,
    megatron_accumulation_bytes,
    optimizer_step_bytes,
    step_source,
)
from ..formulas.parallelism import pipeline_stage_layers
from ..formulas.params import count_params, routed_share
from ..formulas.sdpa_dispatch import TE_ATTENTION_SOURCE, attention_dtype, sdpa_backend
from ..formulas.selective_checkpointing import (
    MODULE_RECOMPUTE_MATMULS,
    full_recompute_flops,
    layer_matmul_shapes,
    module_recompute_flops,
    op_sac_recompute_flops,
    whole_layer_recompute_flops,
)
from ..formulas.tensor_parallel import full_token_replicated_elements, training_tp_framework
from ..formulas.tensors import layer_keys, layer_kind_firsts
from ..formulas.training_activations import ActivationSetup, _head_dims, masked_layers
from ..formulas.training_states import recipe, training_recipe_name
from ..formulas.training_time import (
    DEQUANT_BYTES_PER_WEIGHT,
    GPTQ_DEQUANT_BYTES_PER_WEIGHT,
    Buckets,
    DataParallelComm,
    adapter_flops_per_token,
    attention_core_flops,
    data_parallel_comm,
    dequantization_passes,
    dequantization_seconds,
    device_hours,
    megatron_bucket_elements,
    megatron_buckets,
    optimizer_step_seconds,
    paged_step_bytes,
    partial_recompute_flops,
    recompute_pass_weight,
    step_tokens_per_second,
    training_flops_per_token,
)
from ..formulas.weight_formats import weight_bytes
from ..frozen import fast_init
from ..numbers import TRAIN_TOKENS, UTILIZATION, check_number
from ..request.quantities import parse_network
from ..result import Assumption, json_data
from ..specs import ModelSpec, TrainingWorkload
from ..specs.training import MEGATRON_PRECISIONS, normalize_targets, recomputes_whole_layer
from ..specs.workload import read_number
from ..suggest import unknown_choice
from ..units import format_seconds
from . import efficiency as E
from . import ranges as R
from .device import (
    TF32_DEFAULT_WHY,
    TF32_MIN_CAPABILITY,
    cuda_capability,
    fp8_peak,
    fp32_matmul_peak,
    host_link,
    numa_assumption,
    nvlink_link_bandwidth,
    nvlink_link_why,
    peer_to_peer,
    peer_to_peer_why,
    resolve_target,
    training_device_fields,
    usable_memory,
)
from .fit import default_machine_size, hourly_price, link_bandwidth_for, vm_share_device
from .framework import with_framework
from .launch import (
    MEGATRON_ROUTER_LOGIT_BYTES,
    kernel_linears,
    layer_code,
    megatron_router_unfused,
    megatron_step_kernels,
    megatron_step_layer_kernels,
    megatron_te_layers,
    moe_block_kernels,
    moe_implementation,
    moe_kinds,
    nf4_weight_shapes,
)
from .model_parallel import COLUMN_PARALLEL_BLOCKS, FsdpStage, dp_ring_bandwidth, model_parallel_time, stage_share
from .speed import attention_width
from .training.compose import (
    context_stage_states,
    estimate_items,
    stage_representatives,
    training_context,
    training_workload,
)
from .training.gather_units import (
    CollectiveVolume,
    backward_layout,
    deepspeed_zero3_volume,
    float8_all_gather,
    fsdp_collective_volume,
)
from .training.setup import (
    attention_kernel_call,
    compiled_loss,
    compute_bytes,
    expert_group,
    expert_tp,
    expert_tp_split,
    given,
    megatron_attention_kernel,
    model_state_ways,
    qlora_base_format,
    qlora_fused_experts,
    te_first_microbatch_cache,
)
from .training.timeline import pipeline_fsdp2

ADAPTER_METHODS = ("lora", "dora", "qlora")
# eager attention's dropout over the scores (formulas/eager_attention_traffic.py D): Megatron-LM's GPT default
# --attention-dropout 0.1 (SC21 megatron/arguments.py line 352)
EAGER_ATTENTION_DROPOUT = True
# catalog CPUs named when a CPU's peak is unknown (`--device cpu`): one with an AMX BF16 peak, one with an FP32 peak
CPU_EXAMPLES = ("intel-xeon-platinum-8488c", "amd-epyc-9654")


def recompute_mode(grad_checkpointing: str | None) -> str:
    """'full' when every checkpointed layer's forward runs again in the backward pass, 'selective-op' for
    torchtitan's op-level policy (the unsaved matmuls run again), else 'none' (Megatron's selective recomputation
    re-runs only the attention core, whose FLOPs the 12 L d s term already counts once)."""
    if grad_checkpointing in ("full", "selective-op"):
        return grad_checkpointing
    return "none"


def checkpointed_layers(num_layers: int, checkpoint_every: int = 1) -> list[int]:
    """The decoder layers checkpointed when only every N-th one is (torchtitan counts from 1: layers N, 2N, ...)."""
    return list(range(checkpoint_every - 1, num_layers, checkpoint_every))  # i with (i + 1) % N == 0


@fast_init
@dataclass(frozen=True)
class TrainingFlops:
    per_token: float
    formula: str
    source: str
    trained_params: int
    forward: float = 0.0  # FLOPs per token of the forward pass alone (eq. (8') phi = forward / per_token)
    # the attention core's share of per_token as counted there (PaLM's 12 L d s, + 4 c d s recomputed), its
    # attention layers L and fully recomputed attention layers c, width d and sequence s (formulas/training_time.py
    # eq. (10) times what a kernel executes from these)
    attention: float = 0.0
    attention_layers: int = 0
    attention_recomputed: int = 0
    attention_width: int = 0
    seq_len: int = 0
    # FLOPs per micro-step whatever its tokens: the fused-expert LoRA adapters' W + B A (formulas/lora.py eq. (3))
    per_micro_step: float = 0.0
    # FLOPs per token the tensor-parallel ranks execute beyond the model's: (tp - 1) x the share of the matrices the
    # framework's TP plan keeps whole and runs on every token of each rank (``with_tp_replicated``)
    tp_replicated: float = 0.0

    def attention_executed(self, kernel: str, recompute_weight: float = 1.0,
                           attended: tuple[float, float] | None = None) -> float:
        """Eq. (10): the attention core's FLOPs per token as ``kernel`` ('flash' | 'eager') executes them; with a
        flash kernel's ``recompute_weight`` (eq. (10'')), the FLOPs that time them at its forward + backward rate;
        ``attended``: the mean keys per query over the attention layers and over the recomputed ones where the
        kernel skips what a mask empties (:func:`masked_attended`; None: causal over the row)."""
        if not self.attention_layers or not self.seq_len:
            return 0.0
        a, a_c = attended if attended is not None else (None, None)
        return attention_core_flops(self.attention_layers, self.attention_width, self.seq_len,
                                    self.attention_recomputed, kernel, recompute_weight=recompute_weight,
                                    attended=a, recomputed_attended=a_c)

    def effective_per_token(self, micro_batch: int) -> float:
        """FLOPs per token with the per-micro-step term spread over its tokens (formulas/training_time.py eq. (4'):
        F + D / T, T = ``micro_batch`` x seq_len the tokens of one micro-step per device): what a run's total
        (tokens x this) and step time (T x F + D, eq. (6)) count; ``per_token`` where there is no such term."""
        if not self.per_micro_step:
            return self.per_token + self.tp_replicated
        return (self.per_token + self.tp_replicated
                + self.per_micro_step / (max(1, micro_batch) * max(1, self.seq_len)))

    def effective_formula(self, micro_batch: int) -> str:
        """``formula`` with the per-micro-step term stated per token, as ``effective_per_token`` counts it."""
        formula = (f"{self.formula} + {self.tp_replicated:.4g} run again on the other tensor-parallel ranks "
                   "(matrices kept whole)" if self.tp_replicated else self.formula)
        if not self.per_micro_step:
            return formula
        t = max(1, micro_batch) * max(1, self.seq_len)
        return (f"{formula}; per token: {self.per_token + self.tp_replicated:.4g} + D / T = "
                f"{self.per_micro_step:.4g} / {t:,} "
                f"(micro_batch {micro_batch} x seq_len {self.seq_len}) = "
                f"{self.effective_per_token(micro_batch):.4g} (eq. (4'))")

    @property
    def forward_share(self) -> float:
        """phi of formulas/training_time.py eq. (8'): the forward pass's share of the executed FLOPs."""
        return self.forward / self.per_token if self.forward > 0 else 1.0 / 3.0


@lru_cache(maxsize=256, typed=True)
def _matmul_setup(spec: ModelSpec, method: str, rank: int, targets: tuple[str, ...] | str, tp: int = 1,
                  dora: bool = False) -> ActivationSetup:
    """The parts of an ActivationSetup that decide which matmuls a layer runs (adapters, tensor parallelism);
    memoized on its immutable arguments (an invalid rank or target set raises every time: lru_cache keeps no
    exception)."""
    if method in ADAPTER_METHODS:
        lora_params(spec, rank, targets, dora=dora)  # the rank and targets checked (one InputError)
    adapted = adapted_roles(spec, targets) if method in ADAPTER_METHODS else frozenset()
    return ActivationSetup(batch=1, seq=1, full=method not in ADAPTER_METHODS, adapted=adapted,
                           rank=rank if adapted else 0, tp=tp)


def recomputed_matmul_modules(w: TrainingWorkload) -> frozenset[str]:
    """Megatron's selective recompute modules of ``w`` whose recomputed forward runs matmuls
    (formulas/selective_checkpointing.py MODULE_RECOMPUTE_MATMULS); empty without 'selective'."""
    if w.grad_checkpointing != "selective":
        return frozenset()
    return w.recomputed_modules & frozenset(MODULE_RECOMPUTE_MATMULS)


@lru_cache(maxsize=1024, typed=True)
def flops_per_token(spec: ModelSpec, method: str = "full", seq_len: int = 2048, recompute: str = "none",
                    rank: int = 16, targets: tuple[str, ...] | str = TrainingWorkload.targets,
                    checkpoint_every: int = 1, reentrant: bool = False,
                    modules: frozenset[str] = frozenset()) -> TrainingFlops:
    """Training FLOPs per token for ``method`` (full, lora, dora, qlora) and ``recompute`` ('none', 'full',
    'selective-op'; see :func:`recompute_mode`) on every ``checkpoint_every``-th layer; ``reentrant``: a full
    recomputation re-runs each layer's last matmul too (``checkpoint_impl`` 'reentrant', Megatron-LM's
    CheckpointFunction, or 'non-reentrant-no-early-stop': specs/training.py ``recomputes_whole_layer``);
    ``modules``: Megatron's selective recompute modules with matmuls (:func:`recomputed_matmul_modules`), their
    forward again in every layer (selective_checkpointing.py eq. M1); memoized on its immutable arguments (the same
    for every device of a catalog search)."""
    n = count_params(spec).active
    width = attention_width(spec)
    # L of the attention-core term: the layers that attend to the sequence (a hybrid's per-layer schedule,
    # specs/model.py layer_types: Mamba-, MoE- and MLP-only Nemotron-H layers run no attention core)
    layers = spec.attention_layers
    ckpt = checkpointed_layers(spec.num_layers, checkpoint_every) if recompute != "none" else []
    ckpt_attn = sum(map("none".__ne__, map(spec.layer_types.__getitem__, ckpt)))
    every = f" of every {checkpoint_every}-th layer" if checkpoint_every > 1 else ""
    per_step = 0.0
    if method in ADAPTER_METHODS:
        lp = lora_params(spec, rank, targets, dora=method == "dora")
        na = lp.total - lp.experts_total  # the fused experts' adapters work per micro-step (eq. (4'))
        ew = expert_adapter_work(spec, rank, targets) if lp.experts_total else None
        f = adapter_flops_per_token(n, na, layers, width, seq_len, "none",
                                    ew.grad_params if ew is not None else 0.0)
        fwd = 2.0 * n + 2.0 * na + 4.0 * layers * width * seq_len
        base, source, trained = "4N + 6N_a + 12 L d s (frozen base: no weight gradients)", "eqs. (4)-(5)", lp.total
        if ew is not None:
            per_step = float(ew.delta_flops_per_micro_step(set(ckpt) if recompute == "full" else frozenset()))
            base = (f"4N + 2N_e + 6N_a + 12 L d s (frozen base; N_e = {ew.grad_params:.4g} routed-expert weights per "
                    f"token whose gradient PEFT's W + BA computes) + {per_step:.4g} FLOP per micro-step (the "
                    f"experts' W + BA, formulas/lora.py eq. (3))")
            source = "eqs. (4'), (5)"
    elif method == "full":
        f = training_flops_per_token(n, layers, width, seq_len, "none")
        fwd = f / 3.0  # 2N + 4 L d s
        # every parameter is trained (gradients, optimizer step, gradient reduction): an MoE model's total, not the
        # active count the FLOPs take (each routed expert gets its tokens' gradients; the states hold all of them)
        base, source, trained = "6N + 12 L d s", "eqs. (1)-(2)", count_params(spec).total
    else:
        raise InputError(unknown_choice("method", method, ("full", *ADAPTER_METHODS)))
    st = _matmul_setup(spec, method, rank, targets, dora=method == "dora")
    if recompute == "full":
        r = partial_recompute_flops(_sum_by_kind(spec, ckpt, whole_layer_recompute_flops if reentrant
                                                 else full_recompute_flops, st), width, seq_len, ckpt_attn)
        f += r
        formula = (f"{base} + {r:.4g} (full recomputation of {len(ckpt)} decoder layers{every}, "
                   + ("each layer's whole forward again: reentrant, or non-reentrant without early stop)" if reentrant
                      else "early stop before each layer's last matmul)"))
        source += ", (2')"
    elif recompute == "selective-op":
        r = _sum_by_kind(spec, ckpt, op_sac_recompute_flops, st)
        f += r
        formula = f"{base} + {r:.4g} (op-level selective recomputation{every}: unsaved matmuls)"
        source += ", (2'')"
    else:
        formula = base
    if modules:
        r = _sum_by_kind(spec, list(range(spec.num_layers)),
                         lambda sp, i, s: module_recompute_flops(sp, i, s, modules), st)
        f += r
        formula += f" + {r:.4g} (Megatron selective recompute of {', '.join(sorted(modules))}: their forward again)"
        source += ", selective_checkpointing.py (M1)"
    recomputed_attn = ckpt_attn if recompute == "full" else 0
    attn = 12.0 * layers * width * seq_len + 4.0 * recomputed_attn * width * seq_len
    return TrainingFlops(f, formula, f"formulas/training_time.py {source}", trained, fwd, attn, layers,
                         recomputed_attn, width, seq_len, per_step)


def _sum_by_kind(spec: ModelSpec, layers: list[int], per_layer: Callable[[ModelSpec, int, ActivationSetup], int],
                 st: ActivationSetup) -> int:
    """sum(per_layer(spec, i, st) for i in layers), evaluated once per layer kind (ModelSpec.layer_key: a layer's
    matmuls depend on it only through its kind); integers, so the sum is the same in any grouping."""
    keys = layer_kind_firsts(spec)  # (each kind an int)
    kinds = tally(map(keys.__getitem__, layers))
    first = dict(zip(map(keys.__getitem__, reversed(layers)), reversed(layers), strict=True))  # each kind's first
    return sum(n * per_layer(spec, first[kind], st) for kind, n in kinds.items())


def routed_expert_widths(spec: ModelSpec, split: int) -> tuple[int, int, int]:
    """(x, width, fc1 width) of one routed expert split ``split`` ways (tp, or Megatron's expert TP): its input and
    output width x (Nemotron-H's latent width where it has one, else the hidden size), fc2's input width ceil(I /
    split), and fc1's output width, 2 of those under a gated unit (gate and up fused, Megatron-LM @d7288711
    megatron/core/transformer/moe/experts.py lines 180-183). The one rule of the routed experts' shapes."""
    m = spec.moe
    if m is None:
        raise InputError(f"{spec.name} has no routed experts")
    width = -(-m.expert_intermediate_size // split)
    return m.latent_size or spec.hidden_size, width, width * (2 if m.expert_gated else 1)


@lru_cache(maxsize=1024, typed=True)
def step_linear_blocks(spec: ModelSpec, method: str, rank: int, targets: tuple[str, ...] | str, tp: int = 1,
                       dora: bool = False, routed: bool = True) -> tuple[tuple[tuple[int, int, bool], ...], ...]:
    """(input width, output width, trained) of every linear layer one training step runs on one device, one block
    per decoder layer in order and the lm_head's last: each decoder layer's projections and adapters
    (formulas/selective_checkpointing.layer_matmul_shapes), an MoE layer's top-k routed experts (``routed``; left
    out where the step times them as grouped GEMMs of their own shape, ``megatron_expert_gemms``), and the lm_head
    (trained only in full fine-tuning). A layer's block depends on it only through its kind (ModelSpec.layer_key,
    as its tensors do: formulas/tensors.py model_layout), so the layers of one kind share one block object;
    memoized on its immutable arguments (the same for every device of a catalog search)."""
    st = _matmul_setup(spec, method, rank, targets, tp, dora)
    by_kind: dict[int, tuple[tuple[int, int, bool], ...]] = {}
    keys = layer_kind_firsts(spec)
    for i in dict.fromkeys(keys):  # the first layer of each kind
        lin = [(w_in, w_out, st.full or "lora_" in name) for name, w_in, w_out, _ in layer_matmul_shapes(spec, i, st)]
        if routed and spec.moe_layers[i] and spec.moe is not None:
            x, i_e, fc1 = routed_expert_widths(spec, tp)
            for _ in range(spec.moe.experts_per_token):
                lin.extend([(x, i_e, st.full)] * (fc1 // i_e))  # a gated unit's gate and up projections
                lin.append((i_e, x, st.full))
        by_kind[i] = tuple(lin)
    return (*map(by_kind.__getitem__, keys), ((spec.hidden_size, spec.vocab_size, st.full),))


@dataclass(frozen=True)
class ExpertGemms:
    """A Megatron-Core MoE layer's routed experts on one device as TEGroupedMLP runs them (formulas/gemm_shapes.py
    eqs. (6)-(8)): ``local`` experts of ``rows`` rows each (M_e, eq. (7)), of which ``launched`` get a row, ``launched_rows``
    each (eq. (8)); fc1 ``x`` -> ``fc1_width`` (gate and up fused), fc2 ``width`` -> ``x``; ``layers`` MoE layers
    on the model."""

    rows: float
    local: int
    x: int
    width: int
    fc1_width: int
    layers: int
    launched: int
    launched_rows: float


def megatron_expert_gemms(spec: ModelSpec, w: TrainingWorkload, tokens: float) -> ExpertGemms | None:
    """The routed experts' grouped GEMMs of ``w`` when Megatron-Core runs them (estimate/launch.py
    ``moe_implementation`` 'megatron-te': TEGroupedMLP, one GEMM per local expert per fc, Megatron-LM @d7288711
    megatron/core/transformer/moe/experts.py lines 156-213, fc1 of width 2 I under a gated unit, lines 180-183),
    else None. ``tokens``: the device's tokens per micro-batch."""
    if spec.moe is None or moe_implementation(w.precision, w.framework) != "megatron-te":
        return None
    m = spec.moe
    ep = max(1, w.ep)
    etp = expert_tp_split(w)
    tp = w.tp if w.tp > 1 else 1
    x, width, fc1 = routed_expert_widths(spec, etp)
    rows = expert_rows(tokens, m.experts_per_token, m.num_experts, ep, tp, etp)
    local = m.num_experts // ep
    launched, launched_rows = occupied_experts(rows, local, m.experts_per_token, m.num_experts)
    return ExpertGemms(rows, local, x, width, fc1, sum(map(bool, spec.moe_layers)), launched, launched_rows)


def expert_gemm_time(g: ExpertGemms, trained: bool, math_rate: float, bandwidth: float, elem_bytes: float,
                     sms: int | None) -> tuple[float, float]:
    """(FLOPs, FLOPs / e) of the model's routed-expert GEMMs per micro-step on one device, eq. (4) of
    formulas/gemm_shapes.py over the shapes of the experts that get rows (eqs. (7)-(8)) with each group's tile and
    wave quantization (eqs. (6)-(6a), on ``sms`` SMs; None: not known, eq. (3)'s tile quantization alone)."""
    flops = timed = 0.0
    t = g.launched_rows
    gemms = [((t, n, k), (t, k, n)) + (((n, k, t),) if trained else ()) for k, n in ((g.x, g.fc1_width),
                                                                                    (g.width, g.x))]
    for m, n, k in (shape for pair in gemms for shape in pair):  # training_gemms over M_ne rows
        f = 2.0 * m * n * k
        # eq. (4)'s e_g: t = max(compute over eq. (6)'s busy tile slots, eq. (2)'s memory time): min(w_G, roofline)
        e = (min(min(1.0, arithmetic_intensity(m, n, k, elem_bytes) * bandwidth / math_rate),
                 grouped_wave_efficiency(m, n, g.launched, sms)) if sms
             else gemm_efficiency(m, n, k, math_rate, bandwidth, elem_bytes))
        flops += f
        timed += f / e
    scale = float(g.launched * g.layers)
    return flops * scale, timed * scale


def step_linears(spec: ModelSpec, method: str, rank: int, targets: tuple[str, ...] | str, tp: int = 1,
                 dora: bool = False) -> list[tuple[int, int, bool]]:
    """:func:`step_linear_blocks` as one list."""
    return [lin for block in step_linear_blocks(spec, method, rank, targets, tp, dora) for lin in block]


@lru_cache(maxsize=256)
def quantized_weights(spec: ModelSpec) -> int:
    """Weights QLoRA keeps in NF4: every decoder-layer linear (bitsandbytes skips lm_head, transformers
    ``llm_int8_skip_modules``; torchtune's builders use FrozenNF4Linear for the non-adapted projections) and all
    routed experts of MoE layers (memoized per model)."""
    st = _matmul_setup(spec, "full", 0, ())
    by_kind: dict[Any, int] = {}
    total = 0
    keys = layer_keys(spec)
    for i in range(spec.num_layers):
        kind = keys[i]
        n = by_kind.get(kind)
        if n is None:
            n = sum(w_in * w_out for _, w_in, w_out, _ in layer_matmul_shapes(spec, i, st))
            if spec.moe_layers[i] and spec.moe is not None:
                m = spec.moe
                n += m.num_experts * (3 if m.expert_gated else 2) * (m.latent_size or spec.hidden_size) \
                    * m.expert_intermediate_size
            by_kind[kind] = n
        total += n
    return total


@lru_cache(maxsize=1024)
def elementwise_bytes_per_token(spec: ModelSpec, w: TrainingWorkload) -> float:
    """Memory-bound bytes per token of one micro-step of ``w`` (formulas/elementwise_traffic.py eq. (E7)): eager
    or compiled (``w.compile``) kernels of every decoder layer, the recomputed forward of the checkpointed layers,
    the loss; LoRA adapters' scale-and-add; norms trained only in full fine-tuning; memoized on its immutable arguments (the same for every device of a catalog search)."""
    adapters: dict[int, tuple[tuple[int, int], ...]] = {}
    tp = w.tp if w.tp > 1 else 1
    if w.method in ADAPTER_METHODS:
        lora_params(spec, w.rank, w.targets, dora=w.dora)  # the rank and targets checked (one InputError)
        adapters = _adapted_linears(spec, w.targets)
    recompute = recompute_mode(w.grad_checkpointing)
    ckpt = len(checkpointed_layers(spec.num_layers, w.checkpoint_every)) if recompute != "none" else 0
    c = float(compute_bytes(w))
    # the training-metric passes (eq. (E12)) run under the loop's precision context: torch.autocast for an autocast
    # recipe, except Composer's amp_fp8, which is transformer-engine's fp8_autocast alone (core/precision.py @
    # v0.16.4 lines 69-81)
    metric_autocast = (recipe(training_recipe_name(w.precision, w.zero, w.method)).autocast
                       and not (w.float8 and w.float8_recipe in TE_RECIPES))
    total = step_bytes_per_token(spec, c, w.compile, w.method == "full", adapters, ckpt, w.loss, tp,
                                 w.kernels == "unsloth", loss_compiled=compiled_loss(w),
                                 sequence_parallel=w.sequence_parallel and tp > 1,
                                 metric_passes=w.train_metric_passes, metric_autocast=metric_autocast,
                                 fp16="fp16" in w.precision,
                                 megatron=w.precision in MEGATRON_PRECISIONS and not w.compile,
                                 moe_permute=megatron_moe_permute(spec, w), liger=w.kernels == "liger",
                                 # ArcticTraining: Liger's SwiGLU off under TiledMLP; the model type's Liger
                                 # modules (formulas/liger_kernels.py swiglu_applies, as the memory side)
                                 liger_swiglu=not w.tiled_mlp and swiglu_applies(spec))
    if w.loss == "liger-flce" and (w.method == "full" or "lm_head" in w.modules_to_save):
        # formulas/liger_kernels.py eq. LG5: the lm_head's weight gradient summed chunk by chunk, per micro-batch
        micro = w.micro_batch * local_tokens(w.seq_len, w.context_parallel)
        # the weight as the loss reads it (Liger's grad_weight is its zeros_like; Recipe.forward_weight_bytes)
        rec = recipe(training_recipe_name(w.precision, w.zero, w.method))
        total += flce_weight_grad_bytes(micro, spec.hidden_size, -(-spec.vocab_size // tp), int(c),
                                        rec.forward_weight_bytes(rec.model_bytes)) / micro
    if w.compile and w.sequence_parallel and tp > 1:
        total += _sequence_parallel_copies_per_token(spec, c, tp, w.micro_batch, w.tp_comm_overlap, ckpt,
                                                     float8_gathered_element_bytes(w.float8_recipe)
                                                     if w.float8 and float8_gathers_in_float8(w.float8_recipe)
                                                     else None)
    if w.attention == "eager":  # formulas/eager_attention_traffic.py eqs. (A1)-(A2): the [b, heads, s, s] scores
        # the layers whose attention core runs its forward again: the checkpointed ones under full recomputation,
        # every layer under Megatron's selective recomputation (it re-runs exactly the attention core)
        again = (set(checkpointed_layers(spec.num_layers, w.checkpoint_every)) if recompute == "full"
                 else set(range(spec.num_layers)) if "core_attn" in w.recomputed_modules else set())
        heads = -(-spec.num_heads // tp)
        total += sum(eager_attention_bytes_per_token(heads, w.seq_len, c, EAGER_ATTENTION_DROPOUT, i in again)
                     for i in range(spec.num_layers) if spec.layer_types[i] != "none")
    if megatron_router_unfused(spec, w):  # formulas/moe_router.py eq. E19: the unfused router's ops over [T, E]
        total += unfused_router_bytes_per_token(spec, w)
    return total


def unfused_router_bytes_per_token(spec: ModelSpec, w: TrainingWorkload) -> float:
    """Eq. (E19)'s bytes (formulas/moe_router.py ``unfused_routing_extra``) per token of the micro-step over every
    MoE layer of a run whose router is unfused (launch.py ``megatron_router_unfused``): forward and backward in each
    MoE layer, the forward again where its MoE block is recomputed (a checkpointed layer under full recomputation,
    every layer under Megatron's selective 'moe' module), on 1/tp of the tokens under sequence parallelism (the router
    runs on the rank's sequence shard, before the dispatch)."""
    m = spec.moe
    if m is None:
        return 0.0
    _, _, bf, bb = unfused_routing_extra(m.num_experts, m.experts_per_token, MEGATRON_ROUTER_LOGIT_BYTES)
    full = recompute_mode(w.grad_checkpointing) == "full"
    again = set(checkpointed_layers(spec.num_layers, w.checkpoint_every)) if full else set()
    if "moe" in recomputed_matmul_modules(w):
        again = set(range(spec.num_layers))
    total = sum(bf + bb + (bf if i in again else 0.0) for i, moe in enumerate(moe_kinds(spec)) if moe)
    return total / (w.tp if w.sequence_parallel and w.tp > 1 else 1)


LIGER_TIME_WHY = (
    "Liger-Kernel (linkedin/Liger-Kernel @ead96b6): kernels liger times its RMSNorm (X read, Y and 1/rms written), "
    "RoPE (q, k rotated in place) and SwiGLU/GeGLU (gate, up read, product written; backward in place) kernels "
    "(formulas/elementwise_traffic.py eqs. E20/E21); loss liger-flce: one cross-entropy kernel over each logits chunk (3c V per "
    "token, eq. E22), the lm_head GEMMs at the same FLOPs, and with the lm_head trained the weight gradient summed "
    f"once per chunk as Liger-Kernel {LIGER_RELEASE} (the newest release) sums it (formulas/liger_kernels.py eq. LG5, "
    "LG5_PATHS: a bf16 lm_head 16 B per element and chunk there; releases up to 0.6.1 and a later unreleased commit "
    "add into grad_weight in place, 4 B)")


MOE_ROUTER_FUSION_WHY = (
    "Megatron-Core's TransformerConfig default moe_router_fusion False (NVIDIA/Megatron-LM @d7288711 megatron/core/"
    "transformer/transformer_config.py line 792): the router's top-k, softmax and scatters run as separate torch ops "
    "(formulas/moe_router.py eq. E19, no aux loss: Megatron's default coefficient 0, line 734) in place of TE's fused "
    "top-k (eq. K9); Megatron-Bridge's recipes leave it off too (NVIDIA-NeMo/Megatron-Bridge @f9b6319e src/megatron/"
    "bridge/recipes/*: moe_router_fusion = False), while its performance configs turn it on: GPT-OSS, Qwen3, "
    "DeepSeek, Kimi and Qwen-VL (scripts/performance/configs/gpt_oss/gpt_oss_llm_pretrain.py line 34, qwen/"
    "qwen3_llm_pretrain.py line 36, deepseek/deepseek_llm_pretrain.py line 38, kimi/kimi_llm_pretrain.py line 46, "
    "qwen_vl/qwen3_vl_pretrain.py line 62, qwen_vl/qwen35_vl_pretrain.py line 40): give moe_router_fusion true "
    "for a run of those configs")


def megatron_moe_permute(spec: ModelSpec, w: TrainingWorkload) -> str:
    """The token permutation formulas/elementwise_traffic.py eqs. (E17)/(E18) count in a Megatron run's MoE layers:
    only under the 'alltoall' dispatcher (the default here, ``moe_dispatch_syncs``), which permutes with TE's fused
    kernels and sorts the received tokens by local expert and back only with more than one local expert, E / ep
    (token_dispatcher.py ``dispatch_postprocess`` / ``combine_preprocess`` ``if self.num_local_experts > 1``
    @d7288711); 'none' for a dense model, the 'flex' dispatcher (HybridEP permutes inside its communication
    kernels) and 'allgather' (not modelled)."""
    if spec.moe is None or (w.moe_dispatcher or "alltoall") != "alltoall":
        return "none"
    return "permute+sort" if spec.moe.num_experts // max(1, w.ep) > 1 else "permute"


def _sequence_parallel_copies_per_token(spec: ModelSpec, c: float, tp: int, sequences: int, fused: bool,
                                        again_layers: int, gather_bytes: float | None) -> float:
    """Eq. (E14) of formulas/elementwise_traffic.py over the decoder layers, per token of the micro-batch: each
    layer's copies around its sequence-dimension collectives and its column-parallel blocks' input-gradient sums on the
    full T (n_b: the block's separate linears, COLUMN_PARALLEL_BLOCKS in layer_matmul_shapes' names), and the
    all-gathers' copies again for the ``again_layers`` checkpointed layers (each taken at the average layer);
    ``gather_bytes``: float8 all-gathers' element size (as estimate/model_parallel.py times them), else None."""
    st = ActivationSetup(batch=1, seq=1, full=True, adapted=frozenset(), rank=0, tp=tp)
    firsts = layer_kind_firsts(spec)
    per_kind: dict[int, tuple[float, float]] = {}
    total = again = 0.0
    for i in range(spec.num_layers):
        k = firsts[i]
        if k not in per_kind:
            names = [name for name, _, _, _ in layer_matmul_shapes(spec, k, st)]
            n_b = tuple(n for n in (sum(map(block.__contains__, names)) for block in COLUMN_PARALLEL_BLOCKS) if n)
            f, b, a = (sequence_parallel_copy_bytes(spec.hidden_size, c, n_b, sequences, fused, gather_bytes)
                       if n_b else (0.0, 0.0, 0.0))
            per_kind[k] = (f + b, a)
        x, a = per_kind[k]
        total, again = total + x, again + a
    return total + again * again_layers / spec.num_layers


def eager_score_seconds_per_token(spec: ModelSpec, w: TrainingWorkload, fl: TrainingFlops, c: float,
                                   math_rate: float, bandwidth: float) -> float:
    """Eq. (A3) of formulas/eager_attention_traffic.py over the model's attention layers, all heads (a
    tensor-parallel device's share is taken with the rest of its compute), the recomputed ones with their forward
    again: the checkpointed layers under full recomputation, every attention layer under Megatron's selective
    recomputation (Korthikanti et al. 2022 section 5: it checkpoints and re-runs the attention core) [s per token]."""
    heads = spec.num_heads
    d_h = fl.attention_width // heads
    again = fl.attention_layers if "core_attn" in w.recomputed_modules else fl.attention_recomputed
    return ((fl.attention_layers - again)
            * score_gemm_seconds_per_token(heads, fl.seq_len, d_h, c, False, math_rate, bandwidth)
            + again * score_gemm_seconds_per_token(heads, fl.seq_len, d_h, c, True, math_rate, bandwidth))


@lru_cache(maxsize=256, typed=True)
def _adapted_linears(spec: ModelSpec, targets: tuple[str, ...] | str) -> dict[int, tuple[tuple[int, int], ...]]:
    """(in, out) of each LoRA-adapted decoder-layer linear, per layer (formulas/lora.py ``adapted_modules``: the same
    at any rank; per model and target set, read only), in its order, from its grouped form (``adapted_layout``: the
    modules the layers alike share are read once)."""
    lay = adapted_layout(spec, targets)
    by_layer: dict[int, list[tuple[int, int]]] = {}
    shared: dict[int, list[tuple[int, int]]] = {}  # id of a tuple of modules the layers alike share -> its linears

    def linears(mods: tuple[AdaptedModule, ...]) -> list[tuple[int, int]]:
        return [lin for m in mods if not m.embedding and m.experts == 1
                for lin in [(m.in_features, m.out_features)] * m.count]

    def per_layer(part: tuple[tuple[AdaptedModule, ...], ...]) -> None:  # decoder layer i's modules: part[i]
        for i, mods in enumerate(part):
            lin = shared.get(id(mods))
            if lin is None:
                lin = shared[id(mods)] = linears(mods)
            if lin:
                by_layer.setdefault(i, []).extend(lin)

    def outside(mods: tuple[AdaptedModule, ...]) -> None:  # before / after the decoder layers: each its own layer
        for m in mods:
            if m.layer >= 0:
                by_layer.setdefault(m.layer, []).extend(linears((m,)))

    per_layer(lay.experts)
    outside(lay.head)
    per_layer(lay.layers)
    outside(lay.tail)
    return {k: tuple(v) for k, v in by_layer.items()}


def dispatch_syncs(spec: ModelSpec, w: TrainingWorkload) -> int:
    """Host-device syncs of Megatron-Core's MoE token dispatcher per micro-step on one device, whole model
    (formulas/launch_overhead.py eq. K10, ``moe_dispatch_syncs``): a Megatron run (its MoE block the
    'megatron-te' implementation) of an MoE model, not compiled, under the dispatcher it names (None: alltoall,
    MOE_DISPATCHER_WHY), with or without expert parallelism: 'alltoall' syncs before the EP all-to-all with ep or tp
    above 1 and otherwise ``before_finish`` (NVIDIA/Megatron-LM @d7288711 token_dispatcher.py:566/575, executed at
    :745), 'allgather' reads its counts back with a blocking ``.cpu()`` at every ep (:295), 'flex' exists only with
    tp x ep above 1 (:1360 asserts it; a dispatcher is named only with ep > 1, TrainingWorkload); its MoE layers once each forward, again when the backward re-runs the MoE
    layer: Megatron's selective recomputation of 'moe' (moe_layer.py:599-616) or its full recomputation of every
    layer (transformer_block.py:442-590 ``_checkpointed_forward``); 0 otherwise (dense models, other frameworks,
    compiled)."""
    if spec.moe is None or w.compile or moe_implementation(w.precision, w.framework) != "megatron-te":
        return 0
    again = w.grad_checkpointing == "full" or (w.grad_checkpointing == "selective"
                                               and "moe" in (w.recompute_modules or ()))
    return moe_dispatch_syncs(sum(moe_kinds(spec)), w.moe_dispatcher or "alltoall", again)


@dataclass(frozen=True)
class SyncedSpan:
    """The kernels eq. K10 (formulas/launch_overhead.py) takes in launch order between a Megatron dispatcher's syncs,
    whole model, one device: ``kinds`` per distinct layer kind its forward's (dense GEMMs with attention, dense other
    kernels, expert GEMMs, MoE-block other kernels) and backward's (GEMMs, other kernels); ``segments`` the distinct
    sequences from one sync to the next with how many times each occurs, as tokens (kind, part): 'pre' / 'post' the
    forward before / after the sync, 'fwd' a dense layer's forward, 'moe' the MoE block's part before the sync
    recomputed alone, 'bwd' a layer's backward, and (-1, 'rest') the part of the step outside the span; ``gemms``,
    ``others`` the span's kernels of each class; ``backward`` whether the backward syncs."""

    kinds: tuple[tuple[int, int, int, int, int, int], ...]
    segments: tuple[tuple[tuple[tuple[int, str], ...], int], ...]
    gemms: int
    others: int
    backward: bool


@lru_cache(maxsize=1024)
def synced_span(spec: ModelSpec, w: TrainingWorkload) -> SyncedSpan | None:
    """The synced span of ``w`` (:class:`SyncedSpan`), None without syncs (``dispatch_syncs``). Its per-layer counts
    are the step's own (``layer_kernels`` and ``moe_block_kernels`` with ``kernels_per_micro_step``'s arguments, via
    ``_layer_kernel_setup``): the decoder layers' forward, each MoE layer split at its sync, and, when the backward
    syncs too, each layer's backward after its recomputed part (the MoE block's, or the whole layer's forward under
    full recomputation), layers in reverse."""
    syncs = dispatch_syncs(spec, w)
    if not syncs or spec.moe is None:
        return None
    kinds_of = moe_kinds(spec)
    backward = syncs > sum(kinds_of)
    _, widths, linears, _, half, code = _layer_kernel_setup(spec, w, routed=False)
    tokens_local = w.micro_batch * w.seq_len / max(1, w.context_parallel)
    mf, mb = moe_block_kernels(spec, "megatron-te", tokens_local, max(1, w.ep), half)
    ef, eb = megatron_expert_gemm_kernels(spec.moe.num_experts, max(1, w.ep))
    te = megatron_te_layers(spec, w)
    if te:  # a Megatron TE layer's own kernels (eqs. K11/K12) and eq. K9's whole block
        te_kinds, (mf, mb) = megatron_step_layer_kernels(spec, w)
    index: dict[tuple[int, int, bool], int] = {}
    kinds: list[tuple[int, int, int, int, int, int]] = []
    order: list[int] = []
    for wd, lin, moe, rot in zip(widths, linears, kinds_of, spec.rotary_layers, strict=True):
        key = (id(wd), id(lin), moe)
        if key not in index:
            if te:
                f_g, f_o, b_g, b_o = te_kinds[moe, rot]
                f, b = f_g + f_o, b_g + b_o
            else:
                f, b = layer_kernels(wd, lin, False, w.method == "full", half, code)
                gf, gb = layer_gemm_kernels(lin)
                f_g, b_g = gf + 1, gb + 1  # and the attention kernel each way
            if moe:
                kinds.append((f_g, f - f_g, ef, round(mf) - ef, b_g + eb, b - b_g + round(mb) - eb))
            else:
                kinds.append((f_g, f - f_g, 0, 0, b_g, b - b_g))
            index[key] = len(kinds) - 1
        order.append(index[key])
    # the micro-step in launch order, None where the host syncs
    items: list[tuple[int, str] | None] = []
    for k in order:
        items.extend([(k, "pre"), None, (k, "post")] if kinds[k][2] + kinds[k][3] else [(k, "fwd")])
    items.append((-1, "rest"))
    if backward:
        full = w.grad_checkpointing == "full"
        for k in reversed(order):
            moe = bool(kinds[k][2] + kinds[k][3])
            if moe:
                items.extend([(k, "pre" if full else "moe"), None, (k, "post"), (k, "bwd")])
            else:
                items.extend([(k, "fwd"), (k, "bwd")] if full else [(k, "bwd")])
    # cyclic (micro-steps back to back): start at the first sync, so the step's rest joins the last segment
    first = items.index(None)
    cyc = items[first + 1:] + items[:first]
    segments: list[tuple[tuple[int, str], ...]] = []
    current: list[tuple[int, str]] = []
    for it in cyc:
        if it is None:
            segments.append(tuple(current))
            current = []
        else:
            current.append(it)
    segments.append(tuple(current))
    gemms = others = 0
    for seg in segments:
        for k, part in seg:
            if k < 0:
                continue
            fg, fo, eg, mo, bg, bo = kinds[k]
            g, o = {"pre": (fg, fo + mo), "post": (eg, 0), "fwd": (fg, fo), "moe": (0, mo), "bwd": (bg, bo)}[part]
            gemms, others = gemms + g, others + o
    return SyncedSpan(tuple(kinds), tuple(tally(segments).items()), gemms, others, backward)


def _layer_kernel_setup(spec: ModelSpec, w: TrainingWorkload, routed: bool
                        ) -> tuple[ActivationSetup, list[LayerWidths], list[list[Linear]], bool, bool, LayerCode]:
    """The arguments the step's per-layer kernel counts take (``layer_kernels``, ``moe_block_kernels``; the one
    setup of ``kernels_per_micro_step`` and eq. K10's ``synced_span``): the matmul setup, per layer its widths and
    linears (``kernel_linears``, ``routed`` as there), whether the recipe autocasts, whether the layers run in half
    precision (a full fine-tune under torch.autocast keeps fp32 weights and an fp32 residual stream: the casts of
    eq. K6, norms in fp32), and the model's layer code."""
    tp = w.tp if w.tp > 1 else 1
    st = _matmul_setup(spec, w.method, w.rank, w.targets, tp, w.dora)
    widths, linears = kernel_linears(spec, st, routed=routed)
    autocast = recipe(training_recipe_name(w.precision, w.zero, w.method)).autocast
    half = w.precision != "fp32" and not (w.method == "full" and autocast)
    return st, widths, linears, autocast, half, layer_code(spec)


@lru_cache(maxsize=1024)
def kernels_per_micro_step(spec: ModelSpec, w: TrainingWorkload, capability: int | None = None) -> int:
    """Kernels one micro-step of ``w`` launches on one device (formulas/launch_overhead.py eqs. (K2)/(K3)): each
    decoder layer's projections and adapters (``layer_matmul_shapes``), an MoE layer's top-k routed experts as
    linears (compiled) or, eager, the MoE block of the framework's implementation (eq. K9: ``moe_implementation``,
    ``moe_block_kernels``), the recomputed forward of the checkpointed layers, the embedding, head and loss; eager
    or compiled; memoized on its immutable arguments. ``capability``: the GPU's compute capability (``Device.capability``), which a
    bitsandbytes NF4 base's fused-kernel reach depends on (eq. K5; None: the fallback ladder)."""
    # eager: an MoE layer's router, dispatch and routed experts as its framework's implementation runs them (eq. K9)
    by_implementation = spec.moe is not None and not w.compile
    st, widths, linears, autocast, half, code = _layer_kernel_setup(spec, w, routed=not by_implementation)
    amp = w.method == "full" and autocast
    recompute = recompute_mode(w.grad_checkpointing)
    ckpt = len(checkpointed_layers(spec.num_layers, w.checkpoint_every)) if recompute != "none" else 0
    adapter_casts = adapter_autocast_casts(spec, w) if autocast else 0
    rotary = spec.rotary  # the cos/sin tables the model's forward builds once (head_kernels), whichever layers rotate
    head = head_kernels(w.compile, st.full, st.full, spec.norm_kind == "layernorm" or code.norm_fused, half, w.loss,
                        rotary, loss_compiled=compiled_loss(w), autocast=amp)
    if megatron_te_layers(spec, w):
        # a Megatron-Core TE layer's own kernels (formulas/megatron_layer_kernels.py eqs. K11/K12, eq. K9's block)
        return megatron_step_kernels(spec, w, head)
    # an early-stopping non-reentrant checkpoint skips each recomputed layer's last GEMM and what follows (eq. K2')
    early_stop = recompute == "full" and not recomputes_whole_layer(w.checkpoint_impl)
    # LoRA dropout (eq. K7): one fused dropout kernel per adapter each way on CUDA
    total = step_kernels(widths, linears, w.compile, w.method == "full", ckpt, head, half, early_stop=early_stop,
                         autocast=amp, adapter_casts=adapter_casts, code=code,
                         adapter_dropout=w.adapters and w.lora_dropout != "none")
    if by_implementation:
        # the tokens one device's MoE layer sees per micro-step (its context-parallel share of each sequence)
        tokens_local = w.micro_batch * w.seq_len / max(1, w.context_parallel)
        f, b = moe_block_kernels(spec, moe_implementation(w.precision, w.framework), tokens_local,
                                 max(1, w.ep), half)
        n_moe = sum(moe_kinds(spec))
        total += round(n_moe * (f + b) + f * n_moe * ckpt / len(widths))
    fmt = qlora_base_format(spec, w.nf4_format) if w.method == "qlora" else ""
    if fmt in ("nf4", "nf4-dq") and w.nf4_quantizer in BNB_QUANTIZERS:
        # a bitsandbytes NF4 base (formulas/launch_overhead.py eq. K5): each frozen linear's dequantization kernels in
        # its forward, the recomputed forward of checkpointed layers and its backward; PEFT's clone per adapted one
        # (litgpt's own LoRA over Lightning's bitsandbytes linears has none)
        adapted = 0
        lora_a_in: dict[int, int] = {}  # each distinct layer list counted once (the layers alike share one)
        for lin in linears:
            n = lora_a_in.get(id(lin))
            if n is None:
                n = lora_a_in[id(lin)] = sum(1 for name, _, _ in lin if name.endswith("lora_A"))
            adapted += n
        # the fused kernel's reach depends on the release, the GPU and each weight's shape (nf4_fused_max_rows)
        release = BNB_QUANTIZERS[w.nf4_quantizer]
        tokens = w.micro_batch * w.seq_len
        again = 1.0 + ckpt / spec.num_layers
        per_kind: dict[bool, float] = {}  # a layer's NF4 kernels per pass depend on it only through being MoE
        kinds = moe_kinds(spec)
        for moe in dict.fromkeys(kinds):
            k = 0.0
            for n_out, n_in in nf4_weight_shapes(spec, kinds.index(moe), st, moe):
                f, b = nf4_linear_kernels(fmt == "nf4-dq", tokens, nf4_fused_max_rows(release, capability, n_out, n_in))
                k += f * again + b
            per_kind[moe] = k
        nf4 = sum(map(per_kind.__getitem__, kinds))
        clone = PEFT_4BIT_CLONE_KERNELS if w.nf4_quantizer in PEFT_BNB_QUANTIZERS else 0
        total += round(nf4 + adapted * clone * again)
    elif fmt == "gptq-int4":
        # an auto-gptq GPTQ base (formulas/launch_overhead.py eq. K8): each frozen linear's eager unpacking in its
        # forward and the recomputed forward of checkpointed layers (the backward reuses the saved fp16 weight)
        tokens = w.micro_batch * w.seq_len
        again = 1.0 + ckpt / spec.num_layers
        per_list: dict[int, float] = {  # layers of a kind share their list of linears
            id(lin): sum(gptq_linear_kernels(tokens, bias)[0] for name, _, bias in lin if "lora_" not in name)
            for lin in {id(lin): lin for lin in linears}.values()}
        total += round(again * sum(per_list[id(lin)] for lin in linears))
    return total


def adapter_autocast_casts(spec: ModelSpec, w: TrainingWorkload) -> int:
    """Cast kernels per adapter and pass that torch.autocast and PEFT add to a LoRA step whose adapters are fp32 over
    a half-precision base (formulas/launch_overhead.py eq. K6a; the caller knows the recipe autocasts): PEFT's
    ``Linear`` (a 16-bit base) casts the input too, its bitsandbytes NF4 layers do not under autocast. 0 where the
    adapters are half (``adapter_dtype`` given so) or the base is fp32 (``base_dtype`` fp32: an fp32 stream, not
    counted), and for what K6a has not traced: DoRA's variant forward, LoRA over GPTQ's layers, litgpt's and
    torchao's QLoRA."""
    if w.adapter_dtype not in (None, "fp32"):
        return 0
    if w.method == "lora":
        return 0 if w.base_dtype == "fp32" else adapter_cast_kernels(input_cast=True)
    if (w.method == "qlora" and w.nf4_quantizer in PEFT_BNB_QUANTIZERS
            and qlora_base_format(spec, w.nf4_format) in ("nf4", "nf4-dq")):
        return adapter_cast_kernels(input_cast=False)
    return 0


# the nf4_quantizer settings whose matmuls are bitsandbytes' (specs/training.py NF4_QUANTIZERS), and of them the ones
# PEFT wraps with its LoRA (the others: litgpt over Lightning Fabric's BitsandbytesPrecision)
# with the release whose 4-bit forward they run (formulas/launch_overhead.py BNB_RELEASES): 'bitsandbytes' the current
# one (0.50: its fused kernel at few rows), the 0.42 settings' always dequantizing
BNB_QUANTIZERS = {"bitsandbytes": BNB_SERVING_RELEASE, "bitsandbytes-0.42": "0.42", "lightning-bnb-0.42": "0.42"}
PEFT_BNB_QUANTIZERS = ("bitsandbytes", "bitsandbytes-0.42")


@fast_init
@dataclass(frozen=True)
class Duration:
    """Wall-clock time of a training run on ``devices`` x one device type (None where the peak is unsourced)."""

    tokens: float
    devices: int
    flops: TrainingFlops
    peak_flops: float | None
    peak_key: str
    utilization: float
    utilization_source: str
    seconds: float | None
    assumptions: tuple[Assumption, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)
    step: StepTime | None = None
    micro_batch: int = 1  # sequences per micro-step per device: T = micro_batch x seq_len of eq. (4')
    # why the duration carries no calibrated range ('' = it carries the training-throughput band's): a GPU
    # architecture with no training calibration row (ranges.UNCALIBRATED_ARCH_TRAINING_NO_BAND)
    no_band: str = ""
    # the model FLOPs per token MFU counts (PaLM, Chowdhery et al. 2022, arXiv 2204.02311, section 4.1 and Appendix
    # B): the method's count without recomputation or tensor-parallel repeats (formulas/training_time.py eq. (1),
    # (4) or (4')), and its formula; 0 where not counted
    model_flops_per_token: float = 0.0
    model_flops_formula: str = ""
    # the dtype the run's GEMMs run in (bf16 or fp16 by the recipe's precision; fp32/tf32, or a CPU's key, as timed):
    # what the text names the peak by, ``peak_key`` the catalog rate taken for it (peak_name)
    gemm_dtype: str = ""

    # what ``utilization`` multiplies: the peak of the matmuls' executed FLOPs (estimate/duration.py step_time eq.
    # (6): T F / (R u e)); the memory-bound kernels, dequantization, float8 casts, the optimizer step and
    # communication are timed apart, attention at its kernel's share of it (efficiency.attention_kernel_share)
    utilization_applies_to = "the GEMMs"

    @property
    def peak_name(self) -> str:
        """The peak the run is timed against, in words ('bf16 peak'): the dtype its GEMMs run in (``gemm_dtype``), and the
        catalog's rate taken for it where the device lists that dtype's rate under the other 16-bit name
        (Device.peak_flops: bf16 and fp16 stand in for each other; an RTX 4090's bf16 run at its fp16 entry)."""
        if not self.gemm_dtype or self.gemm_dtype == self.peak_key:
            return f"{self.peak_key} peak"
        return f"{self.gemm_dtype} peak, the listed {self.peak_key} rate"

    @property
    def mfu(self) -> float | None:
        """Model-FLOPs utilisation the answer implies (PaLM section 4.1): tokens x ``model_flops_per_token`` over
        (seconds x devices x peak); None where the run is not timed. Below ``utilization`` where time goes to work
        beyond the GEMMs at u (memory-bound kernels, optimizer, exposed communication), above it never by recompute
        (which MFU does not count)."""
        if self.seconds is None or not self.peak_flops or not self.model_flops_per_token or self.seconds <= 0:
            return None
        return self.tokens * self.model_flops_per_token / (self.seconds * self.devices * self.peak_flops)

    @property
    def flops_per_token(self) -> float:
        """The FLOPs per token the total and the step time count: eq. (4')'s per-micro-step term included
        (``TrainingFlops.effective_per_token``)."""
        return self.flops.effective_per_token(self.micro_batch)

    @property
    def flops_formula(self) -> str:
        """How ``flops_per_token`` is counted (``TrainingFlops.effective_formula``)."""
        return self.flops.effective_formula(self.micro_batch)

    @property
    def tokens_per_second(self) -> float | None:
        return self.step.tokens_per_second if self.step is not None else None

    @property
    def seconds_range(self) -> tuple[float, float] | None:
        """Calibrated [low, high] wall-clock seconds from the training-throughput band (estimate/ranges.py) of the
        validation rows (data-parallel runs and Megatron-LM's tensor/pipeline-parallel Table 1)."""
        r = R.band_range(self.seconds_band, self.tokens_per_second)
        return None if r is None else (self.tokens / r[1], self.tokens / r[0])

    @property
    def seconds_band(self) -> R.Band | None:
        """The training-throughput band ``seconds_range`` divides the tokens by; None where no range is given (no
        step time, a CPU run: the band is of GPU runs, no wall clock, or ``no_band``: an architecture without a
        training calibration row)."""
        if self.step is None or self.step.topology == "cpu" or self.seconds is None or self.no_band:
            return None
        return R.band_for(R.TRAINING_SPEED, R.PYTORCH_TRAINING)

    @property
    def seconds_range_coverage(self) -> dict[str, Any] | None:
        """The coverage of ``seconds_range`` (``ranges.range_coverage``: the band's ``Band.coverage``, the share of
        measured runs its tokens/s band holds, which the seconds range holds alike); None where there is no range."""
        return R.range_coverage(self.seconds_band, self.tokens_per_second)

    @property
    def device_hours(self) -> float | None:
        return device_hours(self.seconds, self.devices) if self.seconds is not None else None

    def to_dict(self) -> dict[str, Any]:
        return json_data({"tokens": self.tokens, "devices": self.devices, "flops_per_token": self.flops_per_token,
                "flops_formula": self.flops_formula, "flops_source": self.flops.source,
                "peak_flops": self.peak_flops, "peak_key": self.peak_key, "peak_name": self.peak_name,
                "gemm_dtype": self.gemm_dtype, "utilization": self.utilization,
                "utilization_source": self.utilization_source,
                "utilization_applies_to": self.utilization_applies_to, "seconds": self.seconds,
                "device_hours": self.device_hours, "tokens_per_second": self.tokens_per_second,
                "model_flops_per_token": self.model_flops_per_token,
                "model_flops_formula": self.model_flops_formula, "mfu": self.mfu,
                "calibrated_seconds_range": self.seconds_range,
                "calibrated_seconds_range_coverage": self.seconds_range_coverage,
                "step": self.step.to_dict() if self.step is not None else None,
                "assumptions": [a.to_dict() for a in self.assumptions],
                "warnings": list(self.warnings)})


@fast_init
@dataclass(frozen=True)
class StepTime:
    """One optimizer step of training, per device: data-parallel (formulas/training_time.py eqs. 6-8) or
    tensor/pipeline-parallel (``model_parallel``: formulas/model_parallel_time.py eqs. (T1)-(P6); compute_seconds is
    then the slowest stage's compute per micro-batch, comm_seconds its tensor-parallel + point-to-point time per
    micro-batch plus its share of the gradient all-reduce, none of it overlapped)."""

    compute_seconds: float  # per micro-step, eq. (6)
    comm_seconds: float  # the collectives' traffic time, per micro-step (per optimizer step / micro_steps)
    paging_seconds: float  # per optimizer step
    micro_steps: int
    tokens_per_second: float  # all devices
    comm_bytes: float  # per device per micro-step (per optimizer step / micro_steps)
    topology: str  # 'single', 'direct', 'host-staged', 'multi-node', 'model-parallel' (tp x pp > 1), 'cpu' (one CPU)
    shape_efficiency: float = 1.0  # formulas/gemm_shapes.py eq. (4), inside compute_seconds
    dequant_seconds: float = 0.0  # per micro-step, eq. (9), inside compute_seconds
    elementwise_seconds: float = 0.0  # per micro-step, formulas/elementwise_traffic.py eq. (E7), inside compute
    optimizer_seconds: float = 0.0  # per optimizer step, formulas/optimizer_step.py (O1)/(O2)
    accumulation_seconds: float = 0.0  # per micro-step after the first, formulas/optimizer_step.py (O3); 0 fused (O3m)
    float8_cast_seconds: float = 0.0  # per micro-step, formulas/float8_training.py (F1)-(F3), inside compute
    exposed_comm_seconds: float = 0.0  # per micro-step, the communication compute does not hide (eqs. (8'), (8''))
    # per micro-step, host time of the kernel launches (formulas/launch_overhead.py eq. K1): compute_seconds is
    # max(device work, launch_seconds)
    launch_seconds: float = 0.0
    sharding: str = ""  # formulas/training_time.py SHARDING_MODES of the data-parallel collectives ('' none)
    grad_sync: str = ""  # 'optimizer-step' | 'micro-step': when the gradients are reduced ('' none)
    # per micro-step, the fused attention kernel timed apart (formulas/training_time.py eq. (10)), inside compute
    attention_seconds: float = 0.0
    # context parallelism, per device per micro-step: ring attention's K/V (and dK/dV) exchange (formulas/
    # context_parallel.py eqs. (CP1)/(CP3)), its traffic time, and the part of it the attention does not hide
    # (eq. (CP2): inside compute_seconds); none of it is in comm_bytes / comm_seconds, the data-parallel collectives
    ring_bytes: float = 0.0
    ring_seconds: float = 0.0
    ring_exposed_seconds: float = 0.0

    @property
    def comm_seconds_per_step(self) -> float:
        """The collectives' traffic time per optimizer step [s]."""
        return self.comm_seconds * self.micro_steps

    @property
    def comm_bytes_per_step(self) -> float:
        """Bytes one device sends per optimizer step [B]."""
        return self.comm_bytes * self.micro_steps

    @property
    def step_seconds(self) -> float:
        """Wall-clock seconds of one optimizer step on every device [s]."""
        return self.micro_steps * self.tokens_per_device_micro / self.tokens_per_second * self.devices

    @property
    def comm_share(self) -> float:
        """Share of a step spent in communication compute does not hide: a model-parallel run's
        (formulas/model_parallel_time.py eq. (P6)); else the exposed data-parallel communication per micro-step
        (formulas/training_time.py eqs. (8'), (8'')) x micro-steps over the step time; 0 for a step of no time. The
        one home of the share the plan's network section shows and its 'network-bound' check reads."""
        if self.model_parallel is not None:
            return self.model_parallel.comm_share
        step = self.step_seconds
        return self.exposed_comm_seconds * self.micro_steps / step if step > 0 else 0.0

    tokens_per_device_micro: float = 0.0
    devices: int = 1
    bus_bandwidth: float = 0.0  # B_bus of the data-parallel collectives (formulas/network.py eq. (11)) [B/s]
    # tensor/pipeline-parallel runs: formulas/model_parallel_time.py eqs. (T1)-(P6) of one device (None otherwise)
    model_parallel: ModelParallelStep | None = None
    # several data-parallel devices whose collectives have no bandwidth to be timed at (no link between them, no
    # network between their machines): the step's communication is not counted (the warning says so), so its time
    # is no answer for the run (recommend rejects such an option)
    comm_uncounted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return json_data({"compute_seconds": self.compute_seconds, "comm_seconds": self.comm_seconds,
                "paging_seconds": self.paging_seconds, "micro_steps": self.micro_steps,
                "tokens_per_second": self.tokens_per_second, "comm_bytes": self.comm_bytes,
                "topology": self.topology, "shape_efficiency": self.shape_efficiency,
                "dequant_seconds": self.dequant_seconds, "elementwise_seconds": self.elementwise_seconds,
                "optimizer_seconds": self.optimizer_seconds, "accumulation_seconds": self.accumulation_seconds,
                "float8_cast_seconds": self.float8_cast_seconds, "launch_seconds": self.launch_seconds,
                "exposed_comm_seconds": self.exposed_comm_seconds, "comm_share": self.comm_share,
                "sharding": self.sharding,
                "grad_sync": self.grad_sync, "comm_seconds_per_step": self.comm_seconds_per_step,
                "comm_bytes_per_step": self.comm_bytes_per_step, "step_seconds": self.step_seconds,
                "bus_bandwidth": self.bus_bandwidth, "attention_seconds": self.attention_seconds,
                "ring_bytes": self.ring_bytes, "ring_seconds": self.ring_seconds,
                "ring_exposed_seconds": self.ring_exposed_seconds,
                "model_parallel": self.model_parallel._asdict() if self.model_parallel is not None else None})


def _base_weight_bytes(w: TrainingWorkload, spec: ModelSpec) -> int:
    """Bytes of the frozen/trained base as it is held (estimate/training/setup.py decides format and fused experts)."""
    return weight_bytes(spec, _weight_format(w, spec), fused_experts=qlora_fused_experts(spec, w)).total


def _weight_format(w: TrainingWorkload, spec: ModelSpec) -> str:
    if w.method == "qlora":
        return qlora_base_format(spec, w.nf4_format)
    return "fp32" if w.precision == "fp32" or w.base_dtype == "fp32" else "bf16"


def float8_cast_eq(recipe: str, compiled: bool) -> str:
    """The equation of formulas/float8_training.py that times ``recipe``'s casts: F1 eager torchao (any recipe), F2
    compiled tensorwise, F3 / F3c / F3m TransformerEngine delayed / current scaling / MXFP8, F4 / F5 compiled rowwise / rowwise
    with bf16 grad_weight."""
    if recipe in TE_RECIPES:
        return {"transformer-engine": "3", "transformer-engine-current": "3c"}.get(recipe, "3m")
    if not compiled:
        return "1"
    return {"torchao": "2", "torchao-rowwise": "4"}.get(recipe, "5")


@dataclass(frozen=True)
class Float8Time:
    """The float8 share of a micro-step (formulas/float8_training.py): FLOPs per token of the converted linears
    (forward, backward and recomputed forward) and their cast bytes per micro-step (the weights FSDP all-gathers in
    float8: gather_units.py, read by ``fsdp_volume``)."""

    flops_per_token: float
    cast_bytes: float


@lru_cache(maxsize=1024)
def float8_time(spec: ModelSpec, w: TrainingWorkload, tokens: int) -> Float8Time:
    """Float8 linears of ``w`` on one device: every decoder layer's projections (an MoE layer's attention only: its
    routed experts are grouped GEMMs convert_to_float8_training leaves alone, but Megatron-Core's TEGroupedMLP runs
    them in float8 under a TransformerEngine recipe, ``megatron_expert_gemms``; the lm_head stays bf16, torchtitan
    float8.py @9dec370 line 99 ``fqn != "output"``). A checkpointed layer's forward runs again: once under full
    recomputation, every second matmul under torchtitan's op-level policy; the GEMMs in float8 per pass:
    ``float8_gemms`` (ROWWISE_WITH_GW_HP's grad_weight runs in bf16 and stays with the BF16 FLOPs). Memoized on its
    immutable arguments."""
    tp = w.tp if w.tp > 1 else 1
    c = float(compute_bytes(w))
    recompute = recompute_mode(w.grad_checkpointing)
    ckpt = set(checkpointed_layers(spec.num_layers, w.checkpoint_every)) if recompute != "none" else set()
    again = 1.0 if recompute == "full" else 0.5
    # each device casts only its 1/n shard of a weight exactly when FSDP2 all-gathers that weight in float8 (the one
    # rule, gather_units.py ``float8_all_gather``: torchao tensorwise's WeightWithDynamicFloat8CastTensor and
    # TransformerEngine's Float8Tensor.fsdp_pre_all_gather send the float8 shard); FSDP1, grad_op (SHARD_GRAD_OP keeps
    # the gathered weight) and the rowwise recipes gather the high-precision weight and cast all of it on each device
    sharded = float8_all_gather(w)
    gemms = float(float8_gemms(w.float8_recipe))
    share = 1.0 / max(1, w.gpus // max(1, w.tp * w.pp)) if sharded else 1.0
    # TransformerEngine under Megatron-Core quantizes each weight once per step, into _fp8_workspaces, and every
    # later forward of the step (the other micro-batches', a recompute) reads it (eq. T2; the one rule the copies'
    # memory reads too, setup.py te_first_microbatch_cache): a micro-batch's share of the weight casts is 1/k, a
    # recompute's none; elsewhere every forward casts the weight
    cached = te_first_microbatch_cache(w)
    k = max(1, w.grad_accumulation)
    first_share = share * te_weight_casts_per_step(k, cached) / k if cached else share
    again_share = 0.0 if cached else share
    if w.fp8_params:  # float8 parameters (eq. T3): no forward casts the weight; the distributed optimizer casts its
        # 1/(dp x cp) shard of the main params once per step, timed at the eq. F3/F3c weight term's bytes per element
        first_share, again_share = 1.0 / (max(1, w.shard_group) * k), 0.0
    # a layer's float8 linears depend on it only through being MoE: (FLOPs, forward, recomputed forward and backward
    # cast bytes) once per kind; the sums below still run layer by layer, so every float is the same
    # Megatron-Core's routed experts under a TransformerEngine recipe: TEGroupedMLP's GroupedLinear quantizes its
    # inputs and weights per expert under every recipe (TransformerEngine @d0067d0d pytorch/module/grouped_linear.py
    # lines 814-886: _split_quantize of the input per m_split, quantize_weight per GEMM, general_grouped_gemm), so
    # their GEMMs run in float8 too; their casts over each local expert's M_e rows (formulas/gemm_shapes.py eq. (7))
    grouped = megatron_expert_gemms(spec, w, tokens) if w.float8_recipe in TE_RECIPES else None
    per_kind: dict[bool, tuple[float, float, float, float]] = {}
    kinds = moe_kinds(spec)
    for moe in dict.fromkeys(kinds):
        linears = layer_linears(spec, tp)[:4] if moe else layer_linears(spec, tp)
        f = 2.0 * sum(a * b for a, b in linears) if moe else float8_layer_flops(spec, tp)
        fwd = refwd = bwd = 0.0
        for (a, b), same, normed in zip(linears, shared_inputs(spec), norm_fed_inputs(spec), strict=False):
            fa, ba = float8_cast_bytes(tokens, a, b, c, w.float8_recipe, w.compile, first_share, same, normed)
            fwd += fa
            bwd += ba
            refwd += fa if again_share == first_share else float8_cast_bytes(
                tokens, a, b, c, w.float8_recipe, w.compile, again_share, same, normed)[0]
        m = spec.moe
        if moe and grouped is not None and m is not None:  # TEGroupedMLP's experts: float8 GroupedLinear GEMMs
            x, i_e, fc1 = routed_expert_widths(spec, tp)  # per token as the step's FLOPs count them (k experts / tp)
            f += 2.0 * m.experts_per_token * (x * fc1 + i_e * x)
            for a, b in ((grouped.x, grouped.fc1_width), (grouped.width, grouped.x)):  # each local expert, M_e rows
                fa, ba = float8_cast_bytes(grouped.rows, a, b, c, w.float8_recipe, w.compile, first_share)
                fwd += grouped.local * fa
                bwd += grouped.local * ba
                refwd += grouped.local * (fa if again_share == first_share else float8_cast_bytes(
                    grouped.rows, a, b, c, w.float8_recipe, w.compile, again_share)[0])
        per_kind[moe] = (f, fwd, refwd, bwd)
    # each layer's addends, per (kind, recomputed): the sums run layer by layer in order (running_sum: the floats a
    # += loop makes)
    layer_kinds = list(zip(kinds, map(ckpt.__contains__, range(len(kinds))), strict=True))
    addends: dict[tuple[bool, bool], tuple[float, float]] = {}
    for moe, again_i in dict.fromkeys(layer_kinds):
        f, fwd, refwd, bwd = per_kind[moe]
        addends[moe, again_i] = (f * (gemms + (again if again_i else 0.0)),
                                 (fwd + refwd if again_i else fwd) + bwd)
    rows = list(map(addends.__getitem__, layer_kinds))
    flops = running_sum(map(itemgetter(0), rows))
    cast = running_sum(map(itemgetter(1), rows))
    return Float8Time(flops, cast)


FSDP_VOLUME_WHY = ("estimate/training/gather_units.py fsdp_collective_volume: per micro-step, every FSDP unit "
                   "all-gathered in its all-gather dtype in the forward (adapters with their unit, torchao float8 "
                   "weights at 1 B), the units resharded after their forward again in the backward, and the "
                   "gradients autograd produced reduce-scattered (LoRA: the adapters'; FSDP1 with the adapters in "
                   "their layer's unit: every element of the unit); payloads, each ring moving (s-1)/s of them")


def fsdp_volume_notes(w: TrainingWorkload, forward: float, backward: float, reduced: float) -> list[Assumption]:
    """The FSDP collective payloads a step time used, per micro-step (per step inside pipeline stages, eq. (P7))
    [bytes] (``fsdp_volume``)."""
    return [Assumption("fsdp_all_gather_forward_bytes", round(forward), True, FSDP_VOLUME_WHY),
            Assumption("fsdp_all_gather_backward_bytes", round(backward), True,
                       "none: inside torch's pipeline stages the units stay gathered through the step "
                       "(formulas/model_parallel_time.py eq. (P7))" if pipeline_fsdp2(w) else
                       f"the units resharded after their forward, formulas/fsdp2_units.py eq. (U5), layout "
                       f"{backward_layout(w)!r}" + (" (torch's defaults: every block resharded, the root kept)"
                                                    if backward_layout(w) != w.fsdp2_units else "")
                       + ("; none under SHARD_GRAD_OP (reshard_after_forward=False)" if w.fsdp == "grad_op" else "")),
            Assumption("fsdp_reduce_scatter_bytes", round(reduced), True,
                       f"the gradients autograd produced, {reduced_grad_bytes(w)} B each (reduced_grad_bytes)")]


@lru_cache(maxsize=1024)
def fsdp_volume(spec: ModelSpec, w: TrainingWorkload, stage: int = 0) -> CollectiveVolume:
    """The FSDP collective payloads of ``w``'s pipeline stage ``stage`` (gather_units.py ``fsdp_collective_volume``;
    a device's tensor-parallel shard of its units) from the context the memory estimate resolves; memoized on its
    immutable arguments (the same for every device of a catalog search)."""
    ctx = training_context(spec, w)
    return fsdp_collective_volume(ctx, context_stage_states(ctx, stage))


def fsdp_stage(spec: ModelSpec, w: TrainingWorkload) -> FsdpStage | None:
    """FSDP's payloads beside tensor / pipeline parallelism (formulas/model_parallel_time.py eq. (P7)), of the stage
    that moves the most: FULL_SHARD / SHARD_GRAD_OP without pipeline parallelism (each micro-batch as plain FSDP;
    SHARD_GRAD_OP keeps the units gathered after their forward: no backward re-gather),
    FSDP2 fully sharded inside torch's pipeline stages (timeline.py ``pipeline_fsdp2``: gathered once per step, no
    re-gather in the backward); None for what eq. (P7) does not time (HSDP, parameter offload, FSDP1 under PP,
    DeepSpeed ZeRO-3) or without data parallelism."""
    if (w.fsdp not in ("full", "grad_op") or w.offload != "none" or w.gpus // (w.tp * w.pp) <= 1
            or (w.pp > 1 and not pipeline_fsdp2(w))):
        return None
    per = reduced_grad_bytes(w)
    ranges = pipeline_stage_layers(spec.num_layers, w.pp, w.pipeline_split, w.virtual_stages)
    # a middle stage whose layer kinds an earlier one has holds its states (compose.py stage_representatives): the
    # same payloads over as many layers, never more than the earlier one (ties keep the first), so not asked again
    reps = stage_representatives(spec, w.pp, w.pipeline_split, w.virtual_stages)
    best: FsdpStage | None = None
    for stage, layers in enumerate(ranges):
        if reps[stage] != stage:
            continue
        vol = fsdp_volume(spec, w, stage)
        one = FsdpStage(float(vol.forward), float(vol.backward) if w.pp == 1 and w.fsdp != "grad_op" else 0.0,
                        float(vol.reduced_elements) * per, len(layers))
        if best is None or one.forward + one.backward + one.reduced > best.forward + best.backward + best.reduced:
            best = one
    return best


DS3_VOLUME_WHY = ("formulas/deepspeed_zero.py zero3_collective_elements over gather_units.py "
                  "deepspeed_zero3_uses: a steady step (the trace recorded; the first step gathers every parameter "
                  "again in the backward), each parameter's N ceil(n / N) elements; measured to the byte against "
                  "DeepSpeed 0.19.8 (tests/training/test_deepspeed_zero3_volume.py)")


def deepspeed_volume_notes(v: Zero3Volume, reduced: float) -> list[Assumption]:
    """DeepSpeed ZeRO-3's config values the step time's collectives follow (their defaults) and the payloads they
    give [bytes] (``deepspeed_volume``)."""
    return [Assumption("stage3_param_persistence_threshold", PARAM_PERSISTENCE_THRESHOLD, True,
                       "DeepSpeed's default (runtime/zero/config.py): parameters of at most this many elements are "
                       "never released, so never gathered in a micro-step; all-gathered once after each optimizer "
                       "step (stage3.py _post_step)"),
            Assumption("stage3_max_reuse_distance", MAX_REUSE_DISTANCE, True,
                       "DeepSpeed's default: a parameter used again within this many elements of the module order "
                       "stays gathered from its forward to its backward (partitioned_param_coordinator.py "
                       "__params_to_release)"),
            Assumption("stage3_prefetch_bucket_size", PREFETCH_BUCKET_SIZE, True,
                       "DeepSpeed's default: a model whose partitioned parameters fit it is queued whole by the "
                       "first prefetch and nothing is gathered again in the backward"),
            Assumption("zero3_all_gather_forward_bytes", v.forward, True, DS3_VOLUME_WHY),
            Assumption("zero3_all_gather_backward_bytes", v.backward, True, DS3_VOLUME_WHY),
            Assumption("zero3_reduce_scatter_bytes", round(reduced), True,
                       "every parameter that requires grad, persistent ones included, reduce-scattered each "
                       "micro-step in communication_data_type (reduced_grad_bytes)"),
            Assumption("zero3_persistent_all_gather_bytes", v.persistent, True,
                       "the persistent parameters, all-gathered once after each optimizer step, not hidden")]


@lru_cache(maxsize=1024)
def deepspeed_volume(spec: ModelSpec, w: TrainingWorkload) -> Zero3Volume:
    """DeepSpeed ZeRO-3's collective payloads of ``w`` (gather_units.py ``deepspeed_zero3_volume``) from the context
    the memory estimate resolves; memoized on its immutable arguments."""
    return deepspeed_zero3_volume(training_context(spec, w))


def sharding_mode(w: TrainingWorkload) -> str:
    """The data-parallel collectives of ``w`` (formulas/training_time.py eqs. (7c)-(7e)): FSDP FULL_SHARD and ZeRO-3
    'full', HSDP 'hybrid', SHARD_GRAD_OP 'grad_op', DeepSpeed ZeRO-1 / ZeRO-2 'zero1' / 'zero2', else DDP 'ddp';
    Megatron-Core's DDP (``TrainingWorkload.megatron_grad_buffer``, eq. (7f)): its distributed optimizer at zero 1
    and 2 alike 'megatron-distopt' (one optimizer: the grad buffer kept whole and reduce-scattered once per step, as
    the memory keeps it, setup.py ``model_state_ways``), else its all-reduce 'megatron-ddp'."""
    if w.megatron_grad_buffer:
        return "megatron-distopt" if w.zero >= 1 else "megatron-ddp"
    if w.zero == 3 or w.fsdp == "full":
        return "full"
    if w.fsdp in ("hybrid", "grad_op"):
        return str(w.fsdp)
    return {1: "zero1", 2: "zero2"}.get(w.zero, "ddp")


def reduced_grad_bytes(w: TrainingWorkload) -> int:
    """Bytes per gradient element the data-parallel reduction moves. One home for the gradient dtype: the memory
    recipe (formulas/training_states.py ``recipe(training_recipe_name(...))``). DDP and FSDP reduce the gradients in
    the dtype they are stored in, the recipe's ``grad_bytes`` (fp32 beside the fp32 weights of autocast recipes and
    of FSDP2's ``MixedPrecisionPolicy(reduce_dtype=fp32)``; bf16 / fp16 for pure half precision and DeepSpeed's own
    mixed precision), or the fp32 ``main_grad`` copy where a recipe keeps one (megatron-fp16 under FSDP).
    Megatron-Core's DDP (``w.megatron_grad_buffer``) reduces its grad buffer in place, on its bucket views, in the
    buffer's dtype at every zero stage (NVIDIA/Megatron-LM @d98e8a64 megatron/core/distributed/
    param_and_grad_buffer.py lines 708-733; the dtype ``torch.float if grad_reduce_in_fp32 else param.dtype``, line
    924): the recipe's ``grad_bytes``, fp32 under megatron-bf16 (``grad_reduce_in_fp32`` on by default under --bf16,
    megatron/training/arguments.py lines 1204-1216), fp16 under megatron-fp16 (its fp32 main grads are ``.float()``
    copies made after the reduction, optimizer/distrib_optimizer.py lines 2756-2792). The one legitimate difference
    otherwise: under DeepSpeed ZeRO (``w.zero`` >= 1) the engine reduces in its
    ``communication_data_type``, bf16 / fp16 whenever that precision is enabled (deepspeedai/DeepSpeed @edaa722
    ``runtime/engine.py`` lines 1405-1416), whatever dtype a recipe that is not DeepSpeed's own (QLoRA's bf16-mixed,
    Megatron, FSDP named beside ZeRO) stores its gradients in; for DeepSpeed's own recipes the two agree (2 bytes)."""
    r = recipe(training_recipe_name(w.precision, w.zero, w.method))
    if w.megatron_grad_buffer:
        return r.grad_bytes
    if w.zero >= 1 and w.precision != "fp32":
        return 2
    return r.main_grad_bytes or r.grad_bytes


GRAD_SYNC_DEFAULT = "optimizer-step"
MOE_DISPATCHER_WHY = ("alltoall: what the MoE recipes run (Megatron-Bridge @bf07e5678c scripts/performance/configs: "
                      "qwen3_llm_pretrain.py line 212 for Qwen3-235B on H100, recipes/gpt_oss/gpt_oss.py line 79; "
                      "Megatron-LM's MoE examples) and torchtitan's default comm_backend 'standard' (all_to_all_single; "
                      "@b5bcd76 torchtitan/models/common/config_utils.py lines 388-423 also offer deepep and hybridep, "
                      "= flex); Megatron-Core's own default is allgather (transformer_config.py line 891, "
                      "@d98e8a64), and Bridge's Qwen3-30B-A3B H100 recipe runs flex (HybridEP, line 374): give "
                      "moe_dispatcher")


GRADIENT_ACCUMULATION_FUSION_WHY = (
    "Megatron's default: Megatron-LM's --no-gradient-accumulation-fusion turns it off (arguments.py:2944-2948 "
    "@d98e8a64, store_false) and Megatron-Bridge's providers default it on wherever Transformer Engine imports "
    "(gpt_provider.py:197, utils/fusions.py:34-54 @f9b6319e); TE's wgrad GEMMs accumulate into the fp32 main_grad "
    "(transformer_engine.py:1293, 1524, 2527 @d98e8a64), so the separate accumulation pass (formulas/optimizer_step.py "
    "eq. (O3)) does not run")
# The parameters whose gradients the fusion does not reach: Megatron's DDP sets grad_added_to_main_grad = False on
# every parameter it wraps (megatron/core/distributed/distributed_data_parallel.py:184-187 @d98e8a64) and its backward
# hook skips the add only where a layer set it True (:575-578); only the wgrad-fused linears set it (Megatron's
# LinearWithGradAccumulationAndAsyncCommunication, megatron/core/tensor_parallel/layers.py:733-762 @d98e8a64, and TE's
# linears under fuse_wgrad_accumulation), so the word embedding (VocabParallelEmbedding, layers.py:232: a lookup, no
# wgrad GEMM), the norm weights and an MoE router's weight (a plain parameter) still pay eq. (O3m) every micro-step.
# Counted by component from count_params (formulas/params.py: embedding, per-layer embedding, norm, router); biases
# and attention sinks inside the attention component are left out (under 0.01 % of the models here).
UNFUSED_COMPONENTS = ("embedding", "per_layer_embedding", "norm", "router")
UNFUSED_ACCUMULATION_WHY = (
    "under gradient_accumulation_fusion Megatron's DDP hook still runs main_grad.add_(param.grad) (eq. (O3m)) for the "
    "parameters outside the wgrad-fused linears: the word embedding, the norm weights, an MoE router "
    "(distributed_data_parallel.py:184-187 and :575-578, tensor_parallel/layers.py:733-762 @d98e8a64); these "
    "elements, split over tp x pp and the gradient shards as the dense parameters are")


def unfused_elements(spec: ModelSpec) -> int:
    """The parameters of ``spec`` the fused wgrad accumulation does not reach (``UNFUSED_COMPONENTS``, count_params'
    exact counts): Llama 3.1 8B 525.6 M of 8.03 B (6.5 %), Llama 3.1 70B 1.5 %, gpt-oss-120b 0.5 %."""
    c = count_params(spec)
    return sum(c.by_component.get(k, 0) for k in UNFUSED_COMPONENTS)


OVERLAP_GRAD_REDUCE_WHY = (
    "given: Megatron --overlap-grad-reduce (Megatron-Bridge's recipes set it: NVIDIA-NeMo/Megatron-Bridge @f9b6319e "
    "recipes/llama/llama3.py lines 727-728): the buffer cut into buckets of Megatron's default bucket_size, each "
    "reduced as soon as the last micro-batch's backward has produced its gradients; the backward hides all but the "
    "last bucket, or what outruns it (formulas/training_time.py eq. (7g))")
OVERLAP_PARAM_GATHER_WHY = {
    True: ("given: Megatron --overlap-param-gather: the updated parameters all-gathered bucket by bucket while the next "
           "step's first forward runs (distrib_optimizer.py lines 3175-3185, distributed_data_parallel.py lines "
           "517-551 @d98e8a64); the first bucket (the embedding's) is not hidden (formulas/training_time.py eq. (7g))"),
    False: ("Megatron-LM's default (--overlap-param-gather, megatron/training/arguments.py lines 3148-3149 "
            "@d98e8a64): the optimizer step all-gathers the updated parameters before the next forward, not hidden"),
}


def megatron_grad_buckets(spec: ModelSpec, w: TrainingWorkload, trained: int) -> tuple[Buckets, float, Buckets | None]:
    """Eq. (7g)'s buckets of ``w``'s grad buffer under ``--overlap-grad-reduce``: (pipeline rank 0's buckets, its
    buffer over the average device's, a later pipeline rank's buckets or None with pp = 1). The buffer holds the
    device's trained elements (``_trained_per_device``, the average over the pipeline stages); rank 0 adds the
    embedding's vocabulary shard (reduced last), the last stage holds the output layer's (reduced first, on rank 0
    when pp = 1); the bucket size Megatron's default for the dp x cp ranks (``megatron_bucket_elements``); ranks
    after the first keep one bucket per model chunk (distributed_data_parallel.py lines 160-171 @d98e8a64)."""
    mine = _trained_per_device(spec, w, trained)[1]
    c = count_params(spec).by_component
    full = w.method == "full"
    emb = c.get("embedding", 0) / w.tp if full else 0.0
    out = c.get("lm_head", 0) / w.tp if full else 0.0
    layers = max(0.0, mine - (emb + out) / w.pp)
    v = w.virtual_stages if w.pp > 1 else 1
    size = megatron_bucket_elements(max(1, w.gpus // max(1, w.tp * w.pp)))
    gap = float(w.pp)  # the interleaved schedule's chunks run their last group of p micro-batches in turn
    first = megatron_buckets(layers, size, out if w.pp == 1 else 0.0, emb, v, gap)
    own = layers + emb + (out if w.pp == 1 else 0.0)
    return (first, own / mine if mine > 0 else 1.0,
            megatron_buckets(layers, None, chunks=v, chunk_gap=gap) if w.pp > 1 else None)


def megatron_grad_reduce_notes(w: TrainingWorkload) -> list[Assumption]:
    """The settings Megatron-Core's gradient reduction is timed with (formulas/training_time.py eqs. (7f), (7g)): the
    buffer's dtype it reduces in, ``overlap_grad_reduce`` and, under the distributed optimizer,
    ``overlap_param_gather``."""
    b = reduced_grad_bytes(w)
    notes = [Assumption("grad_reduce_dtype", "fp32" if b == 4 else "fp16" if w.precision == "megatron-fp16" else "bf16",
                        True, "Megatron-Core reduces its grad buffer in the buffer's dtype (NVIDIA/Megatron-LM @d98e8a64 "
                        "megatron/core/distributed/param_and_grad_buffer.py lines 708-733, 924): fp32 under --bf16 "
                        "unless --grad-reduce-in-bf16 (megatron/training/arguments.py lines 1204-1216), the fp16 "
                        "buffer under --fp16")]
    if w.zero >= 1:
        notes.append(Assumption("overlap_param_gather", w.overlap_param_gather, not w.overlap_param_gather,
                                OVERLAP_PARAM_GATHER_WHY[w.overlap_param_gather]))
    if w.overlap_grad_reduce:
        return [*notes, Assumption("overlap_grad_reduce", True, False, OVERLAP_GRAD_REDUCE_WHY)]
    return [*notes, Assumption("overlap_grad_reduce", False, True,
                       "Megatron-LM's default (--overlap-grad-reduce, megatron/training/arguments.py lines 3121-3122): "
                       "the whole buffer is one bucket (distributed_data_parallel.py lines 135-137), "
                       + ("reduce-scattered" if w.zero >= 1 else "all-reduced")
                       + " once per optimizer step after the last micro-batch's backward (the schedules' no_sync, "
                       "finalize_model_grads), not overlapped"
                       + (", then the updated parameters all-gathered before the next forward" if w.zero >= 1 else "")
                       + " (formulas/training_time.py eq. (7f))")]


GRAD_SYNC_WHY = ("DDP under no_sync: HF accelerate's accumulate and the HF Trainer reduce the gradients once per "
                 "optimizer step (formulas/training_time.py eq. (7d)); 'micro-step' for a loop without no_sync")


def grad_sync_of(w: TrainingWorkload, mode: str) -> str:
    """When ``w``'s gradients are reduced: DDP as ``w.grad_sync`` says (default GRAD_SYNC_DEFAULT); ZeRO-1 at the
    optimizer step and ZeRO-2/3 / FSDP every micro-step, as DeepSpeed and FSDP do (eqs. (7c), (7e)); Megatron-Core's
    DDP once per step whatever the stage (its schedules' ``no_sync``, eq. (7f))."""
    if mode == "ddp":
        return w.grad_sync or GRAD_SYNC_DEFAULT
    return "optimizer-step" if mode in ("zero1", "megatron-ddp", "megatron-distopt") else "micro-step"


@dataclass(frozen=True)
class Network:
    """The network between the machines of a multi-machine run: ``bandwidth`` bytes/s per machine (per direction)."""

    bandwidth: float
    what: str
    given: bool = True


# the flash-attn package's kernels: a sliding layer's window_size and packed documents' varlen rows are skipped
# (formulas/attention_mask.py); llm-foundry's Triton kernel takes neither
FLASH_ATTN_PACKAGE_KERNELS = ("flash-attn-2", "flash-attn-3")


def masked_attended(spec: ModelSpec, w: TrainingWorkload, kernel: str,
                    notes: list[Assumption]) -> tuple[float, float] | None:
    """The mean keys per query (formulas/attention_mask.py eqs. (M1)-(M4)) over the model's attention layers and
    over its fully recomputed ones, for a fused ``kernel`` that skips what the mask empties: a sliding layer's
    window with the flash-attn package (SDPA takes a window only as an explicit mask, training_activations.needs_mask:
    nothing skipped; flash-attn has no chunk mask: Llama 4's chunked layers run causal), packed documents of
    ``w.doc_len`` with the flash-attn package's varlen kernels (attention flash; SDPA and eager attend across
    documents under one explicit mask, named as ``doc_len_masked``); attention flex: every attention layer over the
    BlockMask's tiles, eq. (M5), with or without documents. None: every layer causal over the row (eq. (10)'s
    s / 2). Packing without ``doc_len`` is recorded as one document per row."""
    if w.packing and w.doc_len is None:
        notes.append(Assumption("doc_len", w.seq_len, True, "packing without doc_len: one document fills each row, "
                                "the attention timed causal over the whole row (an upper bound where the kernel "
                                "masks per document; give doc_len)"))
    # per document only on the flash-attn package's varlen path; transformers' SDPA and eager paths attend across the
    # packed documents under one causal mask (formulas/attention_mask.py): doc_len is then not skipped, and said so
    flex = w.attention == "flex"
    docs = (w.doc_len if w.packing and (flex or w.attention == "flash" and kernel in FLASH_ATTN_PACKAGE_KERNELS)
            else None)
    if w.packing and w.doc_len is not None and docs is None:
        notes.append(Assumption("doc_len_masked", False, True, f"attention {w.attention} ({kernel}): the packed "
                                "documents share one causal mask over the row, timed unmasked (transformers' "
                                "SDPA/eager path); attention flash (flash-attn varlen) or flex (FlexAttention's "
                                "BlockMask) skip across documents"))
    if flex:  # eq. (M5): every attention layer over the BlockMask's tiles, B^2 pairs each (the tiles a document
        # boundary or the diagonal cuts computed whole); sliding windows not read (formulas/attention_mask.py)
        a = flex_pairs(w.seq_len, docs) / w.seq_len
        notes.append(Assumption("attention_keys_per_query", round(a, 1), False,
                                f"formulas/attention_mask.py eq. (M5): FlexAttention visits the {FLEX_BLOCK} x "
                                f"{FLEX_BLOCK} tiles of its BlockMask (torch flex_attention.py "
                                "_DEFAULT_SPARSE_BLOCK_SIZE) holding a causal pair "
                                + (f"of the {docs}-token packed documents (torchtune packed_block_causal_mask)"
                                   if docs else "of the row")
                                + f", each whole (causal over the row: {w.seq_len / 2:g})"
                                + (f"; the sliding layers' {spec.sliding_window}-token window is not read here: "
                                   "they are timed over the whole row, an upper bound where a window mask_mod "
                                   "skips the tiles outside it" if "sliding" in spec.layer_types
                                   and spec.sliding_window else "")))
        return a, a
    # Megatron-Core hands Transformer Engine the window itself (window_size, training_activations.needs_mask): its
    # fused kernels (flash-attn's window_size, cuDNN's sliding_window_length) skip the tiles outside it too
    megatron = w.precision in MEGATRON_PRECISIONS
    window = (spec.sliding_window if (megatron or w.attention == "flash" and kernel in FLASH_ATTN_PACKAGE_KERNELS)
              and not spec.chunked_attention and "sliding" in spec.layer_types else None)
    if docs is None and window is None:
        return None
    per_kind = {kind: mean_attended(w.seq_len, window if kind == "sliding" else None, None, docs)
                for kind in set(spec.layer_types) - {"none"}}
    attending = [t for t in spec.layer_types if t != "none"]
    again = ([spec.layer_types[i] for i in checkpointed_layers(spec.num_layers, w.checkpoint_every)
              if spec.layer_types[i] != "none"] if recompute_mode(w.grad_checkpointing) == "full" else [])
    mean = sum(map(per_kind.__getitem__, attending)) / len(attending)
    mean_c = sum(map(per_kind.__getitem__, again)) / len(again) if again else mean
    notes.append(Assumption("attention_keys_per_query", round(mean, 1), False,
                            f"formulas/attention_mask.py: {kernel} skips the tiles "
                            + " and ".join(([f"outside the {window}-token window of the sliding layers "
                                             + ("(Megatron-Core TEDotProductAttention window_size: Megatron-LM "
                                                "@d98e8a64 megatron/core/extensions/transformer_engine.py lines "
                                                "2163-2171)" if megatron else "(flash-attn window_size)")]
                                            if window else [])
                                           + ([f"across the {docs}-token packed documents (flash-attn varlen)"]
                                              if docs else []))
                            + f", mean over the attention layers (causal over the row: {w.seq_len / 2:g})"))
    return mean, mean_c


def sdpa_masked_layers(spec: ModelSpec, w: TrainingWorkload, kernel: str, device: Device,
                       notes: list[Assumption]) -> tuple[int, int, str]:
    """(attention layers, of them fully recomputed, the kernel) of the layers transformers hands torch SDPA an explicit
    mask (training_activations.needs_mask, the memory's rule, which counts that mask and the K/V repeated for it: a
    sliding window shorter than the sequence, or packed documents' block-diagonal mask, torchtune's
    ``create_block_causal_mask`` [b, s, s] bool mask without flex too), where SDPA's own dispatch (``kernel`` 'sdpa'
    resolved to a fused backend) picks another fused backend for a mask (formulas/sdpa_dispatch.py: its flash backend
    takes no mask, check_for_attn_mask): that backend runs every tile of the s x s scores (mem-efficient iterates every
    key block of an additive bias: no causal, window or document tiles skipped), so they are timed at s keys per
    query. (0, 0, kernel) where nothing changes: attention 'flash' / 'flex' or a named kernel, a module that masks
    every layer already (spec.attention_mask_materialised), no capability, or a mask that only the math kernel
    takes."""
    if (w.attention != "sdpa" or w.attention_kernel not in (None, "sdpa") or spec.attention_mask_materialised
            or device.capability is None):
        return 0, 0, kernel
    st = ActivationSetup(batch=1, seq=w.seq_len, attention=w.attention, packing=w.packing,
                         megatron_te=w.precision in MEGATRON_PRECISIONS)
    masked = masked_layers(spec, st)
    if not masked:
        return 0, 0, kernel
    kernel_m, why = sdpa_backend(device.capability, attention_dtype(w.precision, compute_bytes(w)),
                                 spec.math_attention, True)
    if kernel_m == "math":
        return 0, 0, kernel
    again = (len(set(masked) & set(checkpointed_layers(spec.num_layers, w.checkpoint_every)))
             if recompute_mode(w.grad_checkpointing) == "full" else 0)
    cause = ("packed documents' block-diagonal mask (packing under SDPA: transformers' find_packed_sequence_indices, "
             "torchtune's create_block_causal_mask without flex)" if w.packing
             else f"seq_len {w.seq_len} > window {spec.sliding_window}")
    notes.append(Assumption("attention_masked_layers", len(masked), True,
                            f"{len(masked)} {'attention' if w.packing else 'sliding'} layers get SDPA an explicit "
                            f"mask ({cause}; training_activations.needs_mask, the memory's rule): {why}; timed as "
                            f"{kernel_m} over every tile of the s x s scores (a bias: no causal, window or document "
                            "tiles skipped)"))
    return len(masked), again, kernel_m


def math_kernel_rate(device: Device, peak: float, u: float, notes: list[Assumption],
                     warnings: list[str], tf32: bool = False) -> tuple[float, str]:
    """The rate [FLOP/s] torch SDPA's math kernel runs its score matmuls at, and the peak's key: they take q/k/v
    upcast to fp32 (ATen attention.cpp ``_scaled_dot_product_attention_math``), so an fp32 matmul's peak
    (device.fp32_matmul_peak: FP32, TF32 with ``tf32``) at the GEMMs' utilisation ``u``. A device without the sourced
    FP32 peak that rule needs keeps ``peak`` (its BF16 one), with a warning; an unsourced TF32 peak under ``tf32``
    never reaches here: the duration is not estimated (``math_kernel_untimed``, training_duration)."""
    p32, key, warning = fp32_matmul_peak(device, tf32)
    if p32 is None:  # the rule's refusal is this line: the kernel is still timed, at the BF16 peak
        warnings.append(f"{device.id} has no sourced {key.upper()} peak: SDPA's math kernel's fp32 score matmuls are "
                        "timed at its BF16 peak")
        return peak * u, ""
    if warning and warning not in warnings:
        warnings.append(warning)
    notes.append(Assumption("math_kernel_matmul_peak", p32, True,
                            "torch SDPA's math kernel upcasts bf16/fp16 q/k/v to fp32 (ATen attention.cpp "
                            "_scaled_dot_product_attention_math: query_.to(at::kFloat) unless "
                            "allowFP16BF16ReductionMathSDP, off by default); its six score bmm run in fp32 at the "
                            f"dense {key.upper()} peak (estimate/device.py fp32_matmul_peak: tf32 "
                            f"{'on' if tf32 else 'off'}) x the GEMM utilisation"))
    return p32 * u, key


def math_kernel_untimed(spec: ModelSpec, w: TrainingWorkload, device: Device, fl: TrainingFlops) -> bool:
    """Whether torch SDPA's dispatch runs the math kernel (formulas/sdpa_dispatch.py, as the step times it) and the
    fp32 matmul peak it needs is unsourced (device.fp32_matmul_peak: None, e.g. tf32 on a GPU with TF32 units and no
    sourced TF32 figure): the duration is then not estimated, the rule of precision fp32's GEMMs (training_peak)."""
    call = attention_kernel_call(spec, w, device)
    if call is None or fl.attention <= 0 or E.timed_attention_kernel(*call)[0] != "math":
        return False
    return fp32_matmul_peak(device, w.tf32)[0] is None


def fp32_attention_peak(device: Device, w: TrainingWorkload, kernel: str, peak: float,
                        notes: list[Assumption]) -> float:
    """The dense peak [FLOP/s] a fused attention kernel's share is taken of: the GEMMs' ``peak``, but for torch's
    memory-efficient kernel on fp32 q/k/v at compute capability >= 8.0, which runs its two matmuls on the tensor
    cores as 3xTF32 whatever allow_tf32 says (pytorch @ a60dd4b aten/src/ATen/native/transformers/cuda/
    mem_eff_attention/gemm_kernel_utils.h: ``DefaultGemmType<ArchTag, float>`` for kMinComputeCapability >= 80,
    OpClassTensorOp with cutlass::arch::OpMultiplyAddFastF32, three TF32 MMAs per fp32 product): a third of the
    device's dense TF32 peak where sourced. Below 8.0 it runs on the CUDA cores (the SIMT fallback): the FP32 peak."""
    cap = device.capability
    p_tf32 = device.peak_flops("tf32")[0]
    if (w.precision != "fp32" or kernel != "mem-efficient" or cap is None or cap < TF32_MIN_CAPABILITY
            or p_tf32 is None):
        return peak
    notes.append(Assumption("fp32_attention_peak", p_tf32 / 3, True,
                            "torch's memory-efficient attention on fp32 at compute capability >= 8.0: 3xTF32 "
                            "tensor-core MMAs (gemm_kernel_utils.h DefaultGemmType<float>: OpMultiplyAddFastF32, "
                            "whatever allow_tf32), a third of the dense TF32 peak"))
    return p_tf32 / 3


def nccl_bus_bandwidth(device: Device, link_bandwidth: float, notes: list[Assumption]) -> float:
    """The bus bandwidth NCCL's rings reach on ``device``'s link: estimate/device.py ``nvlink_link_bandwidth`` (eq. (12)
    of formulas/network.py on an NVLink GPU of known compute capability, else the link's line rate), the rule serving's
    tensor-parallel all-reduces read too."""
    bw, share = nvlink_link_bandwidth(device, link_bandwidth)
    if share is not None:
        notes.append(Assumption("nccl_nvlink_bus_bandwidth", round(bw / 1e9, 1), True,
                                nvlink_link_why(device, link_bandwidth, share)
                                + "; value in GB/s, for every collective inside a machine"))
    return bw


def step_time(spec: ModelSpec, device: Device, w: TrainingWorkload, fl: TrainingFlops, peak: float, u: float,
              link_bandwidth: float | None, paged_bytes: float, notes: list[Assumption],
              warnings: list[str], network: Network | None = None,
              paged_free_bytes: float | None = None, offloaded_bytes: float = 0.0) -> StepTime:
    """Eqs. (6)-(8) of formulas/training_time.py for workload ``w`` (its gpus, sharding, micro-batch, grad
    accumulation) on ``device``; ``offloaded_bytes``: the activations offloaded to host memory per micro-step (the
    memory estimate's, formulas/activation_offload.py eq. (AO1)); ``paged_bytes``: optimizer states in unified memory
    (the memory estimate's);
    ``paged_free_bytes``: the device memory the step's tensors leave them (eq. (12); None: not known, all move)."""
    n = w.gpus
    if link_bandwidth and n > 1:
        link_bandwidth = nccl_bus_bandwidth(device, link_bandwidth, notes)
    # context parallelism: each device runs its 1/cp share of every sequence (torchtitan cp_shard,
    # formulas/context_parallel.py local_tokens): its GEMMs, attention and elementwise kernels on seq / cp tokens
    tokens = float(w.micro_batch * local_tokens(w.seq_len, w.context_parallel))
    e, t_dq, t_ew = 1.0, 0.0, 0.0
    bw_mem = float(device.memory_bandwidth.base) if device.memory_bandwidth and device.memory_bandwidth.base else 0.0
    if device.kind == "gpu":
        tp = w.tp if w.tp > 1 else 1
        # Megatron-Core's routed experts: TEGroupedMLP's per-expert GEMMs at their own rows, timed apart (eqs. (6)-(7))
        grouped = megatron_expert_gemms(spec, w, tokens)
        blocks = step_linear_blocks(spec, w.method, w.rank, w.targets, tp, w.dora, grouped is None)
        # one GEMM block per layer kind (the layers of a kind share their linears' block object)
        gemms = {k: tuple(training_gemms(int(tokens), b))
                 for k, b in dict(zip(map(id, blocks), blocks, strict=True)).items()}
        elem = float(compute_bytes(w))  # the GEMMs' operand bytes b of eq. (1)
        e = block_shape_efficiency(list(map(gemms.__getitem__, map(id, blocks))), peak * u, bw_mem or float("inf"),
                                   elem)
        grouped_why = ""
        if grouped is not None:
            sms = int(device.sm_count.base) if device.sm_count is not None and device.sm_count.base else None
            f_e, t_e = expert_gemm_time(grouped, w.method == "full", peak * u, bw_mem or float("inf"), elem, sms)
            f_d = sum(2.0 * m * n * k for b in blocks for m, n, k in gemms[id(b)])
            e_e = f_e / t_e
            e = (f_d + f_e) / (f_d / e + t_e)
            launched = ("" if grouped.launched == grouped.local else
                        f", of which {grouped.launched} get a row, {grouped.launched_rows:.4g} each (eq. (8))")
            grouped_why = (f"; the routed experts as Megatron-Core's TEGroupedMLP runs them: {grouped.local} local "
                           f"experts of M_e = {grouped.rows:g} rows each (eq. (7)){launched}, fc1 {grouped.x} -> "
                           f"{grouped.fc1_width}, fc2 {grouped.width} -> {grouped.x}, "
                           + (f"tile and wave quantization over {sms} SMs with 256 x 128 tiles (a smaller "
                              "power-of-two side below them, eq. (6a)), the memory-bound roofline where lower, "
                              f"{TE_GROUPED_GEMM_STREAMS} GEMMs side by side (TransformerEngine's multi-stream "
                              f"grouped GEMM, eq. (6))" if sms else "no SM count known: no wave quantization")
                           + f": {e_e:.4f} of their rate")
        notes.append(Assumption("gemm_shape_efficiency", round(e, 4), True,
                                f"formulas/gemm_shapes.py eq. (4): {int(tokens)} tokens per GEMM, {elem:g}-byte "
                                f"operands, roofline at "
                                f"{'the device memory bandwidth' if bw_mem else 'no sourced bandwidth (roofline off)'}"
                                f", tile quantization T = 128 (NVIDIA Matrix Multiplication Background guide)"
                                + grouped_why))
        if w.method == "qlora" and bw_mem:
            layers = spec.num_layers
            ckpt = len(checkpointed_layers(layers, w.checkpoint_every)) if w.grad_checkpointing == "full" else 0
            fmt = qlora_base_format(spec, w.nf4_format)
            # auto-gptq unpacks only at or above its kernel switch (eq. K8); below it the matrix-vector kernel reads
            # the packed weight in place of the GEMM's. The dequantization kernels are memory-bound eager kernels:
            # the same achieved share of the bandwidth as eq. E7's (efficiency.MEMORY_BOUND_BANDWIDTH)
            unpacked = not (fmt == "gptq-int4" and tokens < GPTQ_KERNEL_SWITCH_ROWS)
            t_dq = dequantization_seconds(quantized_weights(spec) / tp, dequantization_passes(fmt, ckpt / layers),
                                          bw_mem * E.memory_bound_bandwidth(device.kind).expected,
                                          DEQUANT_BYTES_PER_WEIGHT[fmt]) if unpacked else 0.0
    eta = E.memory_bound_bandwidth(device.kind)
    # the CPU's own RAM (a VM: its share of the socket); an Apple chip's unified memory (its GPU's, under MPS)
    if bw_mem and device.kind in ("gpu", "cpu", "apple"):
        per_token = elementwise_bytes_per_token(spec, w)
        t_ew = elementwise_seconds(tokens * per_token, bw_mem, eta.expected)
        if spec.moe is not None and megatron_te_layers(spec, w):  # the router the launches and traffic count
            fused = bool(w.moe_router_fusion)
            notes.append(Assumption(
                "moe_router_fusion", fused, w.moe_router_fusion is None,
                ("given: TE's fused top-k and score function (eq. K9)" if fused
                 else "given" if w.moe_router_fusion is not None else MOE_ROUTER_FUSION_WHY)
                + ("" if fused or megatron_router_unfused(spec, w) else
                   "; not modelled for this model's sigmoid router with an expert bias (eq. E19 is the softmax "
                   "top-k): counted as eq. K9's fused router")
                + (f"; eq. E19 adds {unfused_router_bytes_per_token(spec, w):.4g} B per token and "
                   "formulas/moe_router.py unfused_routing_extra's launches per MoE layer"
                   if megatron_router_unfused(spec, w) else "")))
        notes.append(Assumption("elementwise_bytes_per_token", round(per_token), True,
                                "formulas/elementwise_traffic.py eq. (E7): norms, rotary, activation, residual "
                                "and loss kernels, forward, backward and recomputed forward, "
                                + ("Megatron's fused layer (eqs. E15/E16: fused norms inside the TE norm-linear, "
                                   "one q/k/v and one fc1 linear, TE's fused RoPE, bias_swiglu; Megatron-LM "
                                   "@d7288711, TransformerEngine @d0067d0d)"
                                   if w.precision in MEGATRON_PRECISIONS and not w.compile
                                   else "Unsloth's Triton kernels (eqs. E8/E9, read from unsloth @015bdef; no "
                                   "measured Unsloth throughput validates them)" if w.kernels == "unsloth"
                                   else "compiled (torch.compile: " + SOURCE_COMPILED + ")" if w.compile
                                   else "eager (" + SOURCE_EAGER + ")")
                                + (f"; sequence parallelism: the norms, residual adds and input-gradient sums on "
                                   f"1/{w.tp} of the tokens (eq. (E10))" if w.sequence_parallel and w.tp > 1 else "")
                                + ("; compiled, the copies around the sequence-dimension collectives and the "
                                   "column-parallel blocks' input-gradient sums on all the tokens (eq. (E14)"
                                   + (": under async TP the unfused reduce-scatters' sums only, the fused pairs' "
                                      "layout copies not counted" if w.tp_comm_overlap else "") + ")"
                                   if w.sequence_parallel and w.tp > 1 and w.compile else "")
                                + ("; eager attention's softmax and dropout over the scores, "
                                   "formulas/eager_attention_traffic.py eqs. (A1)-(A2), attention dropout on "
                                   "(Megatron's GPT default)" if w.attention == "eager" else "")
                                + (f", at {eta.expected:g} x the host memory bandwidth {bw_mem / 1e9:.4g} GB/s"
                                   if device.kind == "cpu" else
                                   f", at {eta.expected:g} x the unified memory bandwidth {bw_mem / 1e9:.4g} GB/s"
                                   if device.kind == "apple" else "")))
        notes.append(Assumption(eta.name, eta.expected, True, eta.source))
    flops_eff = fl.per_token
    t_f8 = 0.0
    f8: Float8Time | None = None
    if w.float8 and device.kind == "gpu":
        f8 = float8_time(spec, w, int(tokens))
        peak8, stand_in = fp8_peak(device)  # sourced, or the architecture's FP8:BF16 ratio named (device.fp8_peak)
        if stand_in is not None:
            notes.append(stand_in)
        if peak8:  # the converted linears' FLOPs at the FP8 tensor rate (its own share of u), the rest at BF16
            # (float8_time counts one device's 1/tp shards: the whole model's are tp times that)
            rho8 = E.float8_gemm_share(device.architecture)
            share8 = rho8.expected
            rowwise = E.float8_rowwise_share(w.float8_recipe, device.vendor)
            if rowwise is not None:  # torchao's rowwise recipes on CUDA: CUTLASS's rowwise kernel
                share8 *= rowwise.expected
                notes.append(Assumption(rowwise.name, rowwise.expected, True, rowwise.source))
            flops_eff = fl.per_token - f8.flops_per_token * max(1, w.tp) * (1.0 - peak / (peak8 * share8))
            notes.append(Assumption("float8_gemm_flops_per_token", round(f8.flops_per_token), True,
                                    "formulas/float8_training.py: the float8 linears' forward, backward and "
                                    "recomputed GEMMs"
                                    + (", Megatron-Core's routed experts with them (TEGroupedMLP's GroupedLinear "
                                       "quantizes per expert under the TransformerEngine recipe)"
                                       if w.float8_recipe in TE_RECIPES and megatron_expert_gemms(
                                           spec, w, tokens) is not None else "")
                                    + ("; taken in bf16: the shared experts" if spec.moe is not None
                                       and spec.moe.shared_intermediate_size and w.float8_recipe in TE_RECIPES else "")
                                    + ("; taken in bf16: the Mamba mixers' in_proj / out_proj"
                                       if spec.recurrent is not None and spec.recurrent_layer_count
                                       and w.float8_recipe in TE_RECIPES else "")
                                    + f" at the dense FP8 peak {peak8:.4g} FLOP/s"
                                    + (" (MXFP8's block-scaled GEMMs taken at the catalog's dense FP8 rate: it keeps "
                                       "no MXFP8 figure, and NVIDIA's Blackwell datasheets give FP8 and MXFP8 one "
                                       "rate)" if w.float8_recipe == TE_MXFP8 else "") + " x "
                                    f"{rho8.expected:g}" + (f" x {rowwise.expected:g} (rowwise) = {share8:.4g}"
                                                            if rowwise is not None else "")
                                    + " of the BF16 GEMMs' utilisation"))
            notes.append(Assumption(rho8.name, rho8.expected, True, rho8.source))
        else:
            warnings.append(f"{device.id} has no sourced FP8 peak and no FP8 tensor cores known to llmsizer (give "
                            "compute_capability or flops.fp8 in a --hardware-file entry): the float8 GEMMs are timed "
                            "at its BF16 peak")
        if bw_mem:
            t_f8 = elementwise_seconds(f8.cast_bytes, bw_mem, E.MEMORY_BOUND_BANDWIDTH.expected)
            notes.append(Assumption("float8_cast_bytes_per_token", round(f8.cast_bytes / tokens), True,
                                    f"formulas/float8_training.py eq. (F{float8_cast_eq(w.float8_recipe, w.compile)}): "
                                    f"{w.float8_recipe} casts, forward, backward and recompute"
                                    + (f"; float8 parameters (fp8_param_gather, eq. T3): no forward casts a "
                                       f"weight, the distributed optimizer casts its 1/{w.shard_group} shard once "
                                       f"per step, 1/{w.grad_accumulation} of that per micro-batch"
                                       if w.fp8_params else
                                       f"; each weight cast once per step into TransformerEngine's _fp8_workspaces "
                                       f"(Megatron-Core passes is_first_microbatch, eq. T2): 1/{w.grad_accumulation} "
                                       f"of it per micro-batch, none in a recompute"
                                       if te_first_microbatch_cache(w) else "") + f" ({FLOAT8_TIME_SOURCE})"))
        if w.float8_recipe in TORCHAO_RECIPES and not w.compile:
            warnings.append("torchao float8 runs its casts as separate eager kernels (eq. F1); torchtitan/float8.py "
                            "@9dec370 line 14: 'Float8 experimental is intended to be ran under torch.compile for "
                            "competitive performance' (add --compile)")
    if w.kernels == "unsloth" and device.kind == "gpu":
        warnings.append("Unsloth's speed: its Triton kernels' memory traffic is read from its code "
                        "(formulas/elementwise_traffic.py eqs. E8/E9) and no published Unsloth throughput with its "
                        "settings validates it; the offloaded checkpoint copies (non_blocking) are taken as overlapped")
    if (w.kernels == "liger" or w.loss == "liger-flce") and device.kind == "gpu":
        notes.append(Assumption("liger_kernels_time", True, True,
                                LIGER_TIME_WHY + (f"; {spec.model_type}: {modules_note(spec)}"
                                                  if w.kernels == "liger" else "")))
        warnings.append("Liger-Kernel's step time is its kernels' bytes (formulas/elementwise_traffic.py eqs. E20-E22, "
                        "formulas/liger_kernels.py eq. LG5) at the memory-bound bandwidth; its own benchmark rows "
                        "(A100, liger 0.2.1 / 0.4.2) agree only within a factor of about 2 per kernel, and its fused "
                        "loss's per-chunk GEMMs at chunks under 1,024 rows run slower than their FLOPs say "
                        "(tests/formulas/test_liger_speed.py)")
    share, tp_div = (stage_share(spec, w), w.tp) if w.tp * w.pp > 1 else (1.0, 1)
    t_attn = 0.0
    kernel = kernel_why = ""
    kernel_warning: str | None = None
    call = attention_kernel_call(spec, w, device)
    if call is not None and fl.attention > 0:
        # which kernel runs it: formulas/sdpa_dispatch.py via efficiency.timed_attention_kernel (the memory's math
        # kernel terms read the same rule, training_activations.sdpa_runs_math), with the arguments every training
        # answer on this device refuses a kernel by (training/setup.py attention_kernel_call). The mask: a module that
        # always hands SDPA one (spec.attention_mask_materialised, Falcon); packed documents' and sliding layers'
        # masks: sdpa_masked_layers below (the same rule as the memory's); flex and flash take their masks natively
        kernel, kernel_why, kernel_warning = E.timed_attention_kernel(*call)
        if megatron_attention_kernel(w, device) is not None and kernel_warning is None:
            kernel_why = f"Megatron-Core's TEDotProductAttention: TransformerEngine's own choice ({TE_ATTENTION_SOURCE})"
    if kernel and kernel != "math":
        # the fused attention kernel apart from the GEMMs (formulas/training_time.py eq. (10)): what it executes, at
        # the share of the peak the kernel that runs it reaches (efficiency.attention_kernel_share: its speed over the
        # Triton kernel FLASH_ATTENTION_SHARE was fitted on, on Hopper of its mma.sync ceiling); not shape-quantised
        rho = E.FLASH_ATTENTION_SHARE
        attended = masked_attended(spec, w, kernel, notes)
        head_width = call[-1] if call is not None else spec.head_dim
        # its rate by length (efficiency.fa2_sequence_level, fa2_speed_over_reference) read at the causal length with
        # the layers' mean attended span, 2 a (a the mean keys per query: a window or a packed document attends fewer
        # than the row's s / 2), the row's length where every layer is causal over it
        span = float(fl.seq_len) if attended is None else min(float(fl.seq_len), 2.0 * attended[0])
        attn_share, attn_why = E.attention_kernel_share(kernel, device.architecture, u, seq_len=span,
                                                        head_dim=head_width)
        # SDPA's layers handed an explicit mask (sliding, packed) run the backend the dispatch picks for a mask, every tile
        m_layers, m_again, kernel_m = sdpa_masked_layers(spec, w, kernel, device, notes)
        a, a_c = attended if attended is not None else (None, None)
        s_row = float(fl.seq_len)

        def core(w_c: float, masked: bool) -> float:  # eq. (10) of the unmasked layers, or of the masked ones
            if not masked:
                return attention_core_flops(fl.attention_layers - m_layers, fl.attention_width, fl.seq_len,
                                            fl.attention_recomputed - m_again, "flash", recompute_weight=w_c,
                                            attended=a, recomputed_attended=a_c)
            return attention_core_flops(m_layers, fl.attention_width, fl.seq_len, m_again, "flash",
                                        recompute_weight=w_c, attended=s_row, recomputed_attended=s_row)

        groups = ((kernel, False), (kernel_m, True)) if m_layers else ((kernel, False),)
        executed = sum(core(1.0, masked) for _, masked in groups)
        weights = dict.fromkeys((kk for kk, _ in groups), 1.0)
        if fl.attention_recomputed:  # the recomputed forwards at the forward's rate (eq. (10''))
            for kk, _ in groups:
                (s_f, s_b), pass_why = E.attention_pass_shares(kk)
                weights[kk] = recompute_pass_weight(s_f, s_b)
            (s_f, s_b), pass_why = E.attention_pass_shares(kernel)
            notes.append(Assumption("attention_recompute_pass_weight", round(weights[kernel], 4), True,
                                    "formulas/training_time.py eq. (10''): a recomputed forward at the kernel's "
                                    f"forward rate, {s_b / s_f:.3g} x its backward's per FLOP ({pass_why})"))
        shares = {kernel: attn_share}
        if m_layers:
            shares[kernel_m] = E.attention_kernel_share(kernel_m, device.architecture, u, seq_len=fl.seq_len,
                                                        head_dim=head_width)[0]
        attn_peak = fp32_attention_peak(device, w, kernel, peak, notes)
        t_attn = tokens * sum(core(weights[kk], masked) / (attn_peak * shares[kk]) for kk, masked in groups)
        flops_eff -= fl.attention
        notes.append(Assumption("attention_flops_per_token", round(executed), True,
                                "formulas/training_time.py eq. (10): the causal flash-attention kernel's executed "
                                "FLOPs (tiles above the diagonal skipped, backward 2.5 x forward, recomputed forward "
                                "of checkpointed layers"
                                + (", the tiles a window or document boundary masks skipped: formulas/attention_mask.py"
                                   if attended is not None else "")
                                + "), in place of the 12 L d s of the FLOP count"))
        if kernel in E.ATTENTION_KERNEL_SPEED:
            speed = E.ATTENTION_KERNEL_SPEED[kernel]
            notes.append(Assumption(speed.name, round(speed.expected, 4), True, speed.source))
        notes.append(Assumption(rho.name, rho.expected, True, rho.source))
        notes.append(Assumption("attention_kernel_share", round(attn_share, 4), True,
                                attn_why or f"{kernel}'s speed x {rho.name} x the GEMM utilisation "
                                "(estimate/efficiency.py attention_kernel_share)"))
    elif device.kind == "gpu" and fl.attention > 0 and bw_mem:
        # eager attention's batched score GEMMs apart from the projections' GEMMs (formulas/eager_attention_traffic.py
        # eq. (A3)): their s x s matrix's traffic, not overlapped with their math, in place of the 12 L d s term; SDPA's
        # math kernel runs the same matmul-softmax-matmul on q/k/v upcast to fp32 (ATen attention.cpp
        # _scaled_dot_product_attention_math: ``query_.to(at::kFloat)`` unless allowFP16BF16ReductionMathSDP, off by
        # default: 4-byte scores, six fp32 bmm), and an fp32 matmul runs at the FP32 rate, not the BF16 tensor rate
        # (TF32 off by default since torch 1.12; device.fp32_matmul_peak)
        score_bytes = 4.0 if w.precision == "fp32" or kernel == "math" else 2.0
        math_rate, rate_key = peak * u, ""
        if kernel == "math":
            math_rate, rate_key = math_kernel_rate(device, peak, u, notes, warnings, w.tf32)
        t_attn = tokens * eager_score_seconds_per_token(spec, w, fl, score_bytes, math_rate, bw_mem * eta.expected)
        flops_eff -= fl.attention
        notes.append(Assumption("eager_score_gemm_seconds_per_token", t_attn / tokens, True,
                                "formulas/eager_attention_traffic.py eq. (A3): the QK^T, PV and four backward batched "
                                "GEMMs (s x s x d_h per head; again for recomputed layers) at the "
                                + (f"{rate_key} rate" if rate_key else "GEMM rate") + " plus their "
                                "s x s matrix's traffic at the memory-bound kernel bandwidth, not overlapped"))
    if kernel:
        # a default where none is named, or where the named kernel is timed as another (swapped); a named 'sdpa'
        # timed as the backend its dispatch picks is the user's choice
        swapped = w.attention_kernel not in (None, "sdpa", kernel)
        # (a framework profile's kernel is not the user's: specs/given.py)
        notes.append(Assumption("attention_kernel_timed", kernel, not given(w, "attention_kernel") or swapped,
                                f"sdpa given: {kernel_why}" if w.attention_kernel == "sdpa"
                                else "the kernel given" if kernel_why == "given" else kernel_why))
        if kernel_warning is not None:
            warnings.append(kernel_warning)
    # a tensor/pipeline-parallel device runs 1/tp of each GEMM (shapes above at hidden/tp) and of the attention heads
    # of its stage's layers; its memory-bound kernels above are already per device (widths / tp), for its stage's
    # share of the layers; the matrices its framework keeps whole and runs on every token run in full on each rank
    flops_eff += fl.tp_replicated  # (tp - 1) x R's share, counted once in the FLOPs (with_tp_replicated)
    t_dq, t_ew, t_f8 = t_dq * share, t_ew * share, t_f8 * share
    t_c = ((tokens * flops_eff + fl.per_micro_step) / (peak * u * e) + t_attn) / tp_div * share + t_dq + t_ew + t_f8
    t_launch = 0.0
    phi = fl.forward_share  # the forward's share of t_c (eq. K10 moves it: its syncs' time is the forward's)
    if device.kind in ("gpu", "apple"):  # an asynchronous device queue the host feeds (CUDA streams, MPS's Metal
        # command buffers); a CPU runs each op on the host itself, no queue to overlap
        kernels = kernels_per_micro_step(spec, w, device.capability)
        tau = E.HOST_SECONDS_PER_KERNEL
        t_launch = host_seconds(kernels, tau.expected) * share
        notes.append(Assumption("kernels_per_micro_step", kernels, True,
                                f"formulas/launch_overhead.py: {'compiled' if w.compile else 'eager'} kernels of "
                                f"one micro-step ({LAUNCH_SOURCE})"))
        notes.append(Assumption(tau.name, tau.expected, True, tau.source + (
            "; on an Apple GPU a stand-in: the same Python, autograd and dispatch per op, a Metal command encoding "
            "in place of cudaLaunchKernel, no MPS measurement in hand" if device.kind == "apple" else "")))
        if spec.moe is not None and not w.compile:
            notes.append(Assumption("moe_kernels_implementation", moe_implementation(w.precision, w.framework), True,
                                    "formulas/launch_overhead.py eq. K9: the MoE block's kernels as the framework "
                                    "runs it (Megatron-Core TEGroupedMLP: a cuBLAS GEMM per local expert; "
                                    "torchtitan / transformers 5.x: grouped_mm)"))
        syncs = dispatch_syncs(spec, w)
        if syncs and device.kind == "gpu":
            t_c, phi = _synced_seconds(spec, w, t_c, t_launch, t_c - t_dq - t_ew - t_f8, t_dq + t_ew + t_f8,
                                  fl.forward_share, share, tau.expected, syncs, notes)
        else:
            t_c = overlapped_seconds(t_c, t_launch)
    cp_ring = (0.0, 0.0, 0.0)
    if w.context_parallel > 1:
        cp_ring = _ring_exchange(spec, w, int(tokens), t_attn / tp_div * share, link_bandwidth, network, notes, warnings)
        t_c += cp_ring[2]
    if spec.moe is not None and w.ep > 1 and n > 1:
        t_c += _ep_exchange_seconds(spec, w, tokens, link_bandwidth, network, notes, warnings, t_c, fl)
    if offloaded_bytes and device.kind == "gpu":
        t_c = _activation_offload_seconds(device, t_c, phi, offloaded_bytes, w, notes, warnings)
    comm_b = t_m = 0.0
    comm: DataParallelComm | None = None
    topology = "single"
    uncounted = False  # several devices, no bandwidth for their data-parallel collectives (StepTime.comm_uncounted)
    # (dense, experts) gradient ring elements, whole-model terms (computed once: the reductions, ZeRO's all-gather and
    # eq. P5e's split all take them)
    rings = dp_ring_shares(spec, w, fl.trained_params) if n > 1 else (0.0, 0.0)
    if n > 1 and w.tp * w.pp == 1:
        wb_again: float | None = None  # the backward's re-gathers (None: W again)
        vol = fsdp_volume(spec, w) if w.fsdp is not None else None
        ds3 = deepspeed_volume(spec, w) if w.zero == 3 and w.fsdp is None and w.method != "qlora" else None
        after = 0.0  # gathered once after each optimizer update (DeepSpeed ZeRO-3's persistent parameters)
        if vol is not None:  # the units the memory gathers (gather_units.py): adapters, float8, FSDP1 flat params
            wb, wb_again = float(vol.forward), float(vol.backward)
            gb = float(vol.reduced_elements) * reduced_grad_bytes(w)
        elif ds3 is not None:  # DeepSpeed's own rule (gather_units.py deepspeed_zero3_volume)
            wb, wb_again, after = float(ds3.forward), float(ds3.backward), float(ds3.persistent)
            gb = float(ds3.reduced) * reduced_grad_bytes(w)
        else:
            wb = float(_base_weight_bytes(w, spec))
            gb = _dp_reduced_elements(w, fl.trained_params, rings) * reduced_grad_bytes(w)
        host = device.kind == "gpu" and not peer_to_peer(device)
        bw = E.HOST_STAGED_COLLECTIVE_BANDWIDTH.expected if host else link_bandwidth
        per_node = min(n, w.gpus_per_node)
        nodes = -(-n // per_node)
        over_network = False
        if not bw and per_node == 1 and nodes > 1 and network is not None:
            over_network = True
            # one device per machine (a CPU instance): every hop of the ring crosses the network, no link within a
            # machine is used, so eq. (11)'s bus bandwidth is the machine's network alone (formulas/network.py)
            bw = network.bandwidth
        topology = "host-staged" if host else ("multi-node" if nodes > 1 else "direct")
        if bw:
            if nodes > 1 and (host or network is None):
                warnings.append(f"{n} x {device.id} on {nodes} machines of {per_node} (gpus_per_node): "
                                + ("host-staged collectives are modelled within one machine only"
                                   if host else "no network between the machines given (--network, or an instance "
                                   "with a network)")
                                + "; data-parallel communication is timed as if all devices shared one machine's "
                                "link, a lower bound of its time")
                per_node, nodes = n, 1
            mode = sharding_mode(w)
            sync = grad_sync_of(w, mode)
            ub = _dp_reduced_elements(w, fl.trained_params, rings) * compute_bytes(w)  # ZeRO-1/2's
            if w.fp8_params:  # the te linears' float8 parameters all-gathered at 1 B (eq. T3)
                ub -= _fp8_param_elements(spec) * (compute_bytes(w) - FLOAT8_BYTES)
            buckets = (megatron_grad_buckets(spec, w, fl.trained_params)[0]
                       if w.overlap_grad_reduce and mode.startswith("megatron-") else None)
            node_bw = network.bandwidth if network is not None and nodes > 1 else None
            ring_bw = None
            if vol is None and ds3 is None and not host and node_bw is not None:  # eqs. (P5), (P5e): expert rings
                dense_ring, expert_ring = rings
                if expert_ring:
                    ring_bw = dp_ring_bandwidth(w, ring_bus_bandwidth(bw, nodes, node_bw), bw, node_bw, dense_ring,
                                                expert_ring, notes)
            comm = data_parallel_comm(n, per_node, wb, gb, mode, spec.num_layers, bw, node_bw, host,
                                      sync, ub, wb_again, after, buckets, w.overlap_param_gather, ring_bw)
            if vol is not None:
                notes.extend(fsdp_volume_notes(w, wb, 0.0 if mode == "grad_op" else wb_again or 0.0, gb))
            if ds3 is not None:
                notes.extend(deepspeed_volume_notes(ds3, gb))
            if w.offload == "params" and w.fsdp is not None:
                comm = _offload_copies(spec, device, w, comm, mode, float(fl.trained_params), notes)
            k = w.grad_accumulation
            comm_b, t_m = comm.bytes_per_step(k) / k, comm.seconds_per_step(k) / k
            if mode == "ddp" and k > 1:
                notes.append(Assumption("grad_sync", sync, w.grad_sync is None, GRAD_SYNC_WHY))
            elif mode.startswith("megatron-"):
                notes.extend(megatron_grad_reduce_notes(w))
            elif mode in ("zero1", "zero2"):
                notes.append(Assumption("deepspeed_overlap_comm", False, True,
                                        "DeepSpeed's default below stage 3 (runtime/zero/config.py lines 383-386): "
                                        "the gradient reduction runs on the compute stream, the updated weights are "
                                        "all-gathered after the optimizer step (formulas/training_time.py eq. (7e))"))
            notes.append(Assumption("collective_bandwidth", bw, True,
                                    (E.HOST_STAGED_COLLECTIVE_BANDWIDTH.source if host
                                     else "the machines' network: one device per machine, no link within one"
                                     if over_network else "the devices' link within a machine (per direction)")
                                    + (f"; {peer_to_peer_why(device)}" if device.kind == "gpu" else "")))
            if nodes > 1 and network is not None:
                notes.append(Assumption("inter_node_network", network.bandwidth, not network.given,
                                        f"{network.what}: bytes/s per machine of {per_node} devices, {nodes} "
                                        f"machines; ring bus bandwidth {comm.bus_bandwidth / 1e9:.4g} GB/s "
                                        "(formulas/network.py eq. (11))"))
            if not mode.startswith("megatron-"):  # Megatron's: overlap_grad_reduce above
                notes.append(Assumption("collective_overlap", "by phase", True,
                                        "formulas/training_time.py eq. (8'): forward collectives overlap the forward, "
                                        "backward ones the backward (FSDP prefetch); the first unit's all-gather and "
                                        "the last unit's gradient reduction are not hidden"))
        else:
            uncounted = True
            warnings.append(f"no interconnect bandwidth for {n} x {device.id}: data-parallel communication "
                            "is not counted")
    mp: ModelParallelStep | None = None
    if w.tp * w.pp > 1:
        topology = "model-parallel"
        mode_r = recompute_mode(w.grad_checkpointing)
        fsdp = fsdp_stage(spec, w)
        ckpt_layers = checkpointed_layers(spec.num_layers, w.checkpoint_every)
        dense_ring, expert_ring = rings
        ring_elements = dense_ring + expert_ring
        ring = ring_elements * reduced_grad_bytes(w)
        dp_mp = max(1, w.gpus // max(1, w.tp * w.pp))
        # the all-reduce's second half: Megatron's distributed optimizer all-gathers the updated parameters in their
        # own dtype (eq. (7f)), float8 parameters (eq. T3) the te linears' weights at 1 B, the rest as before
        gathered = compute_bytes(w) if sharding_mode(w) == "megatron-distopt" else reduced_grad_bytes(w)
        gather: float | None = None
        if w.fp8_params or gathered != reduced_grad_bytes(w):
            gather = ring_elements * gathered
            if w.fp8_params:
                gather -= _fp8_param_elements(spec) * (dp_mp - 1) / dp_mp * (gathered - FLOAT8_BYTES)
        if w.megatron_grad_buffer and dp_mp > 1:
            notes.extend(megatron_grad_reduce_notes(w))
        mp = model_parallel_time(spec, w, t_c, ring,
                                 ckpt_layers if mode_r == "full" else [],
                                 link_bandwidth, network.bandwidth if network is not None else None, notes, warnings,
                                 peak * u * e if device.kind == "gpu" else 0.0, fsdp, phi, bw_mem,
                                 ckpt_layers if mode_r == "selective-op" else [], gather,
                                 megatron_grad_buckets(spec, w, fl.trained_params)
                                 if w.overlap_grad_reduce and dp_mp > 1 and fsdp is None else None,
                                 expert_ring / ring_elements if ring_elements else 0.0)
        if fsdp is not None and link_bandwidth:
            notes.extend(fsdp_volume_notes(w, fsdp.forward, fsdp.backward, fsdp.reduced))
    if device.kind == "cpu" and n == 1:
        topology = "cpu"
    t_p = 0.0
    if paged_bytes:
        t_p = _paging_seconds(device, paged_bytes, paged_free_bytes, notes)
    t_opt = t_acc = 0.0
    if w.offload != "none" and device.kind == "gpu":
        t_opt, t_acc = _host_step_seconds(spec, w, fl.trained_params, notes, warnings)
    elif device.kind in ("gpu", "cpu", "apple") and bw_mem:
        t_opt, t_acc = _per_step_seconds(spec, w, fl.trained_params, bw_mem * eta.expected, notes)
    k = w.grad_accumulation
    if mp is not None:  # eq. (P6): dp replicas, each a pipeline of tp x pp devices
        t_steps = mp.step_seconds
        tps = step_tokens_per_second(n // (w.tp * w.pp), tokens, k, t_steps, t_p, t_opt + (k - 1) * t_acc)
        t_m = (mp.tp_seconds + mp.p2p_seconds) + mp.dp_seconds / k
        comm_b = mp.tp_bytes + mp.p2p_bytes + mp.dp_bytes / k
        exposed = mp.exposed_tp_seconds + mp.p2p_seconds + mp.dp_exposed_seconds / k
        return StepTime(t_c, t_m, t_p, k, tps, comm_b, topology, e, t_dq, t_ew, t_opt, t_acc, t_f8, exposed,
                        t_launch, attention_seconds=t_attn / tp_div * share,
                        tokens_per_device_micro=tokens / (w.tp * w.pp), devices=n, bus_bandwidth=mp.dp_bandwidth,
                        ring_bytes=cp_ring[0], ring_seconds=cp_ring[1], ring_exposed_seconds=cp_ring[2], model_parallel=mp,
                        comm_uncounted=not link_bandwidth)  # (model_parallel_time's warning: nothing counted)
    t_steps = optimizer_step_seconds(t_c, phi, comm, k)
    tps = step_tokens_per_second(n, tokens, k, t_steps, t_p, t_opt + (k - 1) * t_acc)
    mode = sharding_mode(w) if comm is not None else ""
    return StepTime(t_c, t_m, t_p, k, tps, comm_b, topology, e, t_dq, t_ew, t_opt, t_acc,
                    t_f8, t_steps / k - t_c, t_launch, mode, grad_sync_of(w, mode) if mode else "",
                    attention_seconds=t_attn, tokens_per_device_micro=tokens, devices=n,
                    bus_bandwidth=comm.bus_bandwidth if comm is not None else 0.0, ring_bytes=cp_ring[0],
                    ring_seconds=cp_ring[1], ring_exposed_seconds=cp_ring[2], comm_uncounted=uncounted)


def _cp_exchange_bandwidth(w: TrainingWorkload, span: int, what: str, timed: str, link_bandwidth: float,
                           network: Network | None, warnings: list[str]) -> tuple[float, bool]:
    """The bandwidth a context-parallel exchange of ``span`` ranks runs at: the link inside a machine, or each
    device's share of its machine's network where the ranks span machines (formulas/network.py eq. (8)); spanning
    machines with no network given, the link inside one (a lower bound of the time, warned). With it: whether the
    bandwidth is the network's share."""
    g = min(w.gpus, w.gpus_per_node)
    across = span > g
    if across and network is None:
        warnings.append(f"{what} spans machines of {g} (gpus_per_node) and no network between them is given: {timed} "
                        "over the link inside a machine, a lower bound of its time")
    if across and network is not None:
        return device_share_of_node_bandwidth(network.bandwidth, g), True
    return link_bandwidth, False


def _ring_exchange(spec: ModelSpec, w: TrainingWorkload, tokens: int, t_attn: float, link_bandwidth: float | None,
                   network: Network | None, notes: list[Assumption], warnings: list[str]
                   ) -> tuple[float, float, float]:
    """Ring attention's K/V exchange of a context-parallel rank per micro-step: (bytes, traffic seconds, the seconds
    its attention does not hide)
    (formulas/context_parallel.py eqs. (CP1)-(CP3), by ``w.cp_ring``: torch's ring attention or TransformerEngine's
    P2P ring), over the devices' link, or each device's share of its machine's network (formulas/network.py eq. (8))
    where a CP group spans machines: both frameworks place a CP group's ranks tp apart (Megatron-Core's order
    tp-cp-ep-dp-pp, parallel_state.py line 617; torchtitan's mesh [..., cp, tp], parallel_dims.py), so the ring
    leaves the machine when tp x cp exceeds gpus_per_node."""
    if not link_bandwidth:
        warnings.append(f"no interconnect bandwidth for context parallelism {w.context_parallel}: ring attention's "
                        "K/V exchange is not timed")
        return 0.0, 0.0, 0.0
    q_w, k_w, v_w, _ = (-(-x // w.tp) for x in _head_dims(spec))
    if spec.kv_expanded_in_attention:  # the ring runs on the K/V the module expanded to every query head
        k_w = v_w = q_w
    full = recompute_mode(w.grad_checkpointing) == "full"
    busiest = max(pipeline_stage_layers(spec.num_layers, w.pp, w.pipeline_split, w.virtual_stages if w.pp > 1 else 1),
                  key=len)
    layers = len(busiest)
    te = w.cp_ring == "te-p2p"
    # the layers whose forward runs the ring again in the backward, on that busiest stage (review19 D2/D3): the
    # checkpointed ones under full recomputation; under Megatron's selective recomputation every one, where it re-runs
    # the attention core ('core_attn': TransformerEngine's ring inside it, NVIDIA/Megatron-LM @d98e8a64
    # megatron/core/transformer/attention.py lines 392, 495, 1555); torchtitan's op-level selective checkpointing
    # saves the attention op's output, so its ring does not run again
    if full:
        again = len(set(busiest) & set(checkpointed_layers(spec.num_layers, w.checkpoint_every)))
    else:
        again = layers if te and "core_attn" in w.recomputed_modules else 0
    compute = compute_bytes(w)
    if w.cp_ring == "ulysses":  # DeepSpeed-Ulysses' four all-to-alls a layer, blocking (eq. U3)
        return _ulysses_exchange(spec, w, tokens, layers, again, compute, link_bandwidth, network, notes, warnings)
    v_f, v_b = (p2p_ring_exchange_bytes if te else ring_exchange_bytes)(tokens, k_w, v_w, w.context_parallel, compute,
                                                                        layers, again)
    bandwidth, across = _cp_exchange_bandwidth(w, w.tp * w.context_parallel, f"context parallelism {w.context_parallel} "
                                       f"beside tp {w.tp}", "its ring timed", link_bandwidth, network, warnings)
    t_x = (v_f + v_b) / bandwidth
    exposed = ring_exposed_seconds(t_x, t_attn)
    rounds = w.context_parallel - 1
    notes.append(Assumption("ring_attention_exchange_bytes", v_f + v_b, True,
                            (f"formulas/context_parallel.py eq. (CP3): {layers} layers' K/V sent on {rounds} times "
                             f"in the forward, K/V and dK/dV {rounds} times each in the backward (TransformerEngine's "
                             f"P2P ring, Megatron-Core cp_comm_type 'p2p'; {TE_CP_SOURCE})" if te else
                             f"formulas/context_parallel.py eq. (CP1): {layers} layers' K/V gathered from the other "
                             f"{rounds} ranks in the forward and again in the backward, with the fp32 dK/dV rotated "
                             f"{rounds} rounds ({CP_SOURCE})")
                            + (f", {again} recomputed forwards" if again else "")))
    notes.append(Assumption("ring_attention_exposed_seconds", round(exposed, 6), True,
                            f"formulas/context_parallel.py eq. (CP2): {t_x:.3g} s of exchange at "
                            f"{bandwidth / 1e9:.4g} GB/s ("
                            + ("each device's share of its machine's network: the CP ranks sit tp apart, on other "
                               "machines" if across else "the link inside a machine")
                            + f") against {t_attn:.3g} s of attention per micro-step, overlapped with the attention "
                            "kernels only (each step's transfer posted before its block attention, waited after)"))
    return v_f + v_b, t_x, exposed


def _ulysses_exchange(spec: ModelSpec, w: TrainingWorkload, tokens: int, layers: int, again: int, compute: int,
                      link_bandwidth: float, network: Network | None, notes: list[Assumption],
                      warnings: list[str]) -> tuple[float, float, float]:
    """DeepSpeed-Ulysses' all-to-alls of a rank per micro-step (formulas/context_parallel.py eq. (U3)): (bytes,
    seconds, the same seconds exposed: UlyssesSPAttentionHF waits for each all-to-all before the attention kernel,
    ulysses_sp.py @edaa7221 lines 296-392). Over the link inside a machine, or each device's share of its machine's
    network where the cp ranks span machines (formulas/network.py eq. (8))."""
    q_w, k_w, v_w, o_w = _head_dims(spec)
    k_r, v_r = (ulysses_kv_width(x, spec.num_kv_heads, w.context_parallel) for x in (k_w, v_w))
    v_f, v_b = ulysses_exchange_bytes(tokens, q_w, k_r, v_r, o_w, w.context_parallel, compute, layers, again)
    bandwidth, _ = _cp_exchange_bandwidth(w, w.context_parallel, f"context parallelism {w.context_parallel} (Ulysses)",
                                       "its all-to-alls timed", link_bandwidth, network, warnings)
    t_x = (v_f + v_b) / bandwidth
    notes.append(Assumption("ulysses_all_to_all_bytes", v_f + v_b, True,
                            f"formulas/context_parallel.py eq. (U3): {layers} layers' q, k, v and output all-to-alls "
                            f"({w.context_parallel - 1}/{w.context_parallel} of each sent) in the forward, their "
                            f"gradients' in the backward" + (f", {again} recomputed forwards" if again else "")
                            + f", blocking: {t_x:.3g} s at {bandwidth / 1e9:.4g} GB/s ({ULYSSES_SOURCE})"))
    return v_f + v_b, t_x, t_x


def _ep_exchange_seconds(spec: ModelSpec, w: TrainingWorkload, tokens: float, link_bandwidth: float | None,
                         network: Network | None, notes: list[Assumption], warnings: list[str],
                         compute_seconds: float, fl: TrainingFlops) -> float:
    """The expert-parallel token exchange of the busiest pipeline stage's MoE layers per micro-step
    (formulas/expert_parallel_time.py eqs. (E1)-(E7), by ``w.moe_dispatcher``): ``tokens`` the micro-step's tokens on
    the device (b s / cp), / tp under sequence parallelism; over the devices' link inside a machine and each device's
    share of the machine's network (formulas/network.py eq. (8)) for the peers on other machines. Blocking, or under
    ``w.ep_comm_overlap`` only what the micro-step's ``compute_seconds`` does not hide (eq. (E8)): per MoE layer, its
    routed experts' share of the executed FLOPs (6 x their active parameters per token, ``fl``) as the expert MLP,
    the rest as the attention block."""
    moe = spec.moe
    assert moe is not None
    if not link_bandwidth:
        warnings.append(f"no interconnect bandwidth for expert parallelism {w.ep}: the token all-to-alls are not "
                        "timed")
        return 0.0
    g = min(w.gpus, w.gpus_per_node)
    e_tp = expert_tp_split(w)  # torchtitan: no expert TP, its EP ranks consecutive (eq. (E3'))
    ranges = pipeline_stage_layers(spec.num_layers, w.pp, w.pipeline_split, w.virtual_stages if w.pp > 1 else 1)
    is_moe = [bool(m) for m in spec.moe_layers] or [True] * spec.num_layers
    full = recompute_mode(w.grad_checkpointing) == "full"
    again = set(checkpointed_layers(spec.num_layers, w.checkpoint_every)) if full else set()
    if "moe" in recomputed_matmul_modules(w):  # Megatron's 'moe' module re-runs the dispatch and combine (eq. R6)
        again = set(range(spec.num_layers))
    layers, recomputed = max((sum(is_moe[i] for i in r), sum(is_moe[i] and i in again for i in r)) for r in ranges)
    crosses = min(machine_shares(w.ep, e_tp, g, w.gpus)) < w.ep or e_tp > g
    net = device_share_of_node_bandwidth(network.bandwidth, g) if crosses and network is not None else link_bandwidth
    if crosses and network is None:
        warnings.append(f"expert-parallel group of {w.ep} x etp {e_tp} crosses machines of {g} (gpus_per_node) and no "
                        "network between them is given (--network, or an instance with a network): its all-to-alls "
                        "are timed over the link inside a machine, a lower bound of their time")
    local = tokens / (w.tp if w.sequence_parallel and w.tp > 1 else 1)
    width = moe.latent_size or spec.hidden_size
    kind = w.moe_dispatcher or "alltoall"
    x = expert_parallel_exchange(local, moe.experts_per_token, width, compute_bytes(w), w.ep, e_tp, layers,
                                 recomputed, g, link_bandwidth, net, kind, moe.num_experts, w.gpus)
    notes.append(Assumption("moe_dispatcher", kind, w.moe_dispatcher is None,
                            "given" if w.moe_dispatcher is not None else MOE_DISPATCHER_WHY))
    where = (f"{x.intra_bytes / 1e6:.4g} MB over the link at {link_bandwidth / 1e9:.4g} GB/s"
             + (f", {x.inter_bytes / 1e6:.4g} MB over the device's network share at {net / 1e9:.4g} GB/s"
                if x.inter_bytes else ""))
    what = {"alltoall": f"all-to-alls of {local:g} tokens x top-{moe.experts_per_token} x {width} x (ep - 1)/ep over "
                        f"ep {w.ep}" + (f", each with an all-gather / reduce-scatter in etp {e_tp} (the "
                                        "combine's in the router probabilities' dtype, taken as the activations': "
                                        "Megatron's default moe_router_dtype None; 'fp32' doubles that half)"
                                        if e_tp > 1 else "") + " (eqs. (E1)-(E4))",
            "allgather": f"all-gathers / reduce-scatters of {local:g} tokens x {width} over the {w.ep * e_tp} ranks "
                         "of ep x etp (eq. (E6))",
            "flex": f"DeepEP / HybridEP dispatches / combines of {local:g} tokens x {width}, once per destination "
                    f"rank and machine of the {w.ep * e_tp} ranks of ep x etp (eqs. (E5), (E7))"}[kind]
    exposed = x.seconds
    unpaired, total = unpaired_microbatches(w.grad_accumulation, w.pp, w.virtual_stages if w.pp > 1 else 1)
    if w.ep_comm_overlap and layers:
        rho = min(1.0, 6.0 * count_params(spec).by_component.get("experts", 0) * routed_share(spec)
                  / max(fl.per_token, 1.0))
        per_layer = compute_seconds / layers
        paired = exposed_seconds(x.seconds / x.collectives, layers, (1 - rho) * per_layer, rho * per_layer,
                                 fl.forward_share)
        # the first forward / last backward (pp 1) or the first stage's warm-up / cool-down have no partner (E8')
        exposed = paired_exposed_seconds(paired, x.seconds, w.grad_accumulation, w.pp,
                                         w.virtual_stages if w.pp > 1 else 1)
    notes.append(Assumption("ep_all_to_all_bytes_per_micro_batch", round(x.bytes), True,
                            f"formulas/expert_parallel_time.py, uniform routing (dropless): {x.collectives} "
                            f"{what}, dispatch + combine, forward and backward, of {layers} MoE layers"
                            + (f", again in {recomputed} recomputed" if recomputed else "")
                            + f"; per collective {where}: {x.seconds * 1e3:.4g} ms per micro-batch, "
                            + (f"each dispatch / combine overlapped with another micro-batch's attention block or "
                               f"expert MLP ({compute_seconds * 1e3:.4g} ms of compute; Megatron combined 1F1B, eq. "
                               f"(E8)), the first stage's {unpaired} of {total} (virtual) micro-batches per step "
                               f"alone (eq. (E8')): {exposed * 1e3:.4g} ms exposed"
                               if w.ep_comm_overlap else "not overlapped with compute" + (
                                   " (Megatron-Core overlap_moe_expert_parallel_comm = False)"
                                   if w.precision in MEGATRON_PRECISIONS else ""))))
    return exposed


def _synced_seconds(spec: ModelSpec, w: TrainingWorkload, t_dev: float, t_launch: float, t_gemm: float,
                    t_other: float, forward_share: float, share: float, tau: float, syncs: int,
                    notes: list[Assumption]) -> tuple[float, float]:
    """Eq. K10 (formulas/launch_overhead.py): the micro-step of a Megatron MoE run whose dispatcher blocks the host
    once per MoE layer and pass that syncs (``dispatch_syncs``): the span's segments from sync to sync in launch order
    (``synced_span``), each GEMM/attention and other kernel at its class's mean device time (the forward's share of
    each class, or all of it when the backward syncs too), the rest of the step one eq. K1 block. A pipeline stage
    (``share`` of the layers) is taken as ``share`` of the whole model's micro-step. Returns (seconds, the forward's
    share of them): the time the syncs add is the forward's where only the forward syncs (the backward window that
    hides the gradient reduction, eq. P5e, does not widen)."""
    span = synced_span(spec, w)
    assert span is not None  # (syncs > 0)
    part = 1.0 if span.backward else forward_share
    # whole-model seconds per kernel of each class (a stage's t_gemm, t_other are ``share`` of the model's)
    d_g = t_gemm / share * part / span.gemms if span.gemms else 0.0
    d_o = t_other / share * part / span.others if span.others else 0.0
    blocks: dict[tuple[int, str], StreamBlock] = {}
    ep = max(1, w.ep)
    for k, (fg, fo, eg, mo, bg, bo) in enumerate(span.kinds):
        blocks[k, "pre"], blocks[k, "post"] = megatron_layer_blocks(fg, fo, eg, mo, ep, d_g, d_o, tau)
        blocks[k, "fwd"] = blocks[k, "pre"]
        if span.backward:
            blocks[k, "moe"] = megatron_layer_blocks(0, 0, eg, mo, ep, d_g, d_o, tau)[0]
            blocks[k, "bwd"] = interleaved_block(bg, d_g, bo, d_o, tau)
    whole_dev, whole_host = t_dev / share, t_launch / share
    d_span = d_g * span.gemms + d_o * span.others
    blocks[-1, "rest"] = overlapped_block(max(0.0, whole_host / tau - span.gemms - span.others),
                                          max(0.0, whole_dev - d_span), tau)
    t = share * synced_micro_step_seconds([([blocks[x] for x in seg], n) for seg, n in span.segments], tau)
    t = max(t, t_dev, t_launch)  # (the rounding of the span's kernel counts)
    k1 = max(t_dev, t_launch)
    phi = forward_share if span.backward or t <= 0 else (forward_share * k1 + (t - k1)) / t
    dispatcher = w.moe_dispatcher or "alltoall"
    notes.append(Assumption(
        "moe_dispatch_host_syncs", syncs, True,
        f"formulas/launch_overhead.py eq. K10: Megatron-Core's {dispatcher} dispatcher blocks the host once per MoE "
        f"layer forward{' and again where the backward recomputes it' if span.backward else ''} "
        f"(NVIDIA/Megatron-LM @d7288711 {MEGATRON_DISPATCH_SYNC[dispatcher]}); from each sync to the next the "
        f"{'micro-step' if span.backward else 'forward'}'s kernels on this device run in launch order from an empty "
        f"queue, GEMMs/attention ({round(span.gemms * share)}) and other kernels ({round(span.others * share)}) at "
        f"their class's mean device time, in a Megatron layer's order: {t * 1e3:.1f} ms for eq. K1's "
        f"{k1 * 1e3:.1f} ms" + ("" if span.backward else ", the difference in the forward")))
    return t, phi


def _activation_offload_seconds(device: Device, t_c: float, forward_share: float, offloaded: float,
                                w: TrainingWorkload, notes: list[Assumption], warnings: list[str]) -> float:
    """A micro-step's compute with ``offloaded`` bytes of saved activations copied out in the forward and back in
    the backward over the host link, each phase overlapped with its compute (formulas/activation_offload.py eq.
    (AO1)), over ``device``'s host link (estimate/device.py host_link)."""
    bw, link = host_link(device)
    t_f, t_b = t_c * forward_share, t_c * (1.0 - forward_share)
    t_new = offload_step_seconds(t_f, t_b, offloaded, bw)
    t_x = offloaded / bw
    notes.append(Assumption("activation_offload_bytes_per_micro_step", round(offloaded), True,
                            "the memory estimate's host_offloaded_activations: copied device-to-host in the forward "
                            "and host-to-device in the backward" + (f" (the {w.pp} pipeline stages' micro-batches in "
                                                                     "flight: an upper bound)" if w.pp > 1 else "")))
    notes.append(Assumption("host_link_bandwidth", bw, True, link))
    notes.append(Assumption("activation_offload_overlap", "by phase", True,
                            f"formulas/activation_offload.py eq. (AO1): max(forward {t_f:.3g} s, copies {t_x:.3g} s) + "
                            f"max(backward {t_b:.3g} s, copies {t_x:.3g} s) per micro-step ({OFFLOAD_STREAM_SOURCE})"))
    if t_new > t_c * 1.05:
        warnings.append(f"activation offload: {offloaded / 2**30:.3g} GiB each way per micro-step over the host link "
                        f"({bw / 1e9:.4g} GB/s per direction) take {t_x:.3g} s per phase against {t_c:.3g} s of compute: "
                        f"the step is transfer-bound ({t_new:.3g} s per micro-step; eq. AO1)")
    return t_new


def _paging_seconds(device: Device, paged_bytes: float, free_bytes: float | None, notes: list[Assumption]) -> float:
    """Eq. (12) of formulas/training_time.py: the paged optimizer states' traffic per optimizer step over the host
    link, none when they fit in the ``free_bytes`` the step leaves on the device (None: not known, every byte
    moves), timed at ``device``'s host link (estimate/device.py host_link)."""
    moved = paged_step_bytes(paged_bytes, 0.0 if free_bytes is None else free_bytes)
    fits = free_bytes is not None and moved == 0.0
    where = ("device memory not known: every byte taken to move" if free_bytes is None
             else f"{free_bytes / 2**30:.3g} GiB left free on the device by the step's tensors")
    notes.append(Assumption("paged_bytes_per_step", round(moved), True,
                            f"formulas/training_time.py eq. (12): {paged_bytes / 2**30:.3g} GiB of paged states, "
                            + where + ("; they stay resident after the first step" if fits
                                       else "; each step moves them in and out (eviction in arrival order)")))
    if not moved:
        return 0.0
    bw, link = host_link(device)
    notes.append(Assumption("host_link_bandwidth", bw, True, link))
    return moved / bw


def _offload_copies(spec: ModelSpec, device: Device, w: TrainingWorkload, comm: DataParallelComm, mode: str,
                    trained: float, notes: list[Assumption]) -> DataParallelComm:
    """FSDP with CPU offload (formulas/cpu_offload_time.py eqs. (H1)-(H3)): the parameter shards copied to the
    device before every all-gather and the gradient shards copied to the host after every reduce-scatter, over the
    device's host link (estimate/device.py host_link), folded into the phases of ``comm``."""
    ctx = training_context(spec, w)
    if w.adapters:  # the frozen base as stored (the adapters' own bytes are a rounding error)
        stored = float(_base_weight_bytes(w, spec))
    else:
        stored = float(count_params(spec).total) * ctx.recipe.model_bytes
    shards = min(w.gpus, w.gpus_per_node) if mode == "hybrid" else w.gpus
    grad = _optimizer_step_setup(spec, w)[2]  # the gradient as the host holds it (the parameter's dtype)
    traffic = host_link_traffic(stored, trained * grad, shards, mode != "grad_op")
    notes.append(Assumption("offload_host_link_bytes", round(traffic.total), True,
                            "formulas/cpu_offload_time.py eq. (H1): per device and micro-step, the parameter shard "
                            "copied host-to-device before each all-gather (forward"
                            + (" and backward" if mode != "grad_op" else "") + ") and the gradient shard "
                            f"device-to-host after its reduce-scatter ({OFFLOAD_SOURCE})"))
    bw, link = host_link(device)
    notes.append(Assumption("host_link_bandwidth", bw, True, link))
    notes.append(Assumption("offload_copy_overlap", "by phase", True,
                            "formulas/cpu_offload_time.py eq. (H3): pinned, non_blocking copies on FSDP's copy-in and "
                            "post-reduce streams; each phase takes the longer of its collectives and its copies, the "
                            "first unit's H2D and the last unit's D2H copy are not hidden"))
    return offloaded_comm(comm, traffic, bw)


def _host_step_seconds(spec: ModelSpec, w: TrainingWorkload, trained: int, notes: list[Assumption],
                       warnings: list[str]) -> tuple[float, float]:
    """(optimizer step, one gradient accumulation) seconds over host memory (formulas/cpu_offload_time.py eq. (H4)):
    the elements of every rank of one machine at the host's DRAM bandwidth, the bytes per element of the optimizer
    the memory estimate resolves (formulas/optimizer_step.py)."""
    host, eta = E.OFFLOAD_HOST_MEMORY_BANDWIDTH, E.MEMORY_BOUND_BANDWIDTH_CPU
    optimizer, impl, grad, per = _optimizer_step_setup(spec, w)
    local = _trained_per_device(spec, w, trained)[0]
    machine = local * min(w.gpus, w.gpus_per_node)  # every rank of one machine steps at once
    t_opt = host_step_seconds(machine, per, host.expected, eta.expected)
    t_acc = host_step_seconds(machine, accumulation_bytes(grad), host.expected, eta.expected)
    notes.append(Assumption("optimizer_step_bytes_per_element", per, True,
                            f"formulas/optimizer_step.py: {step_source(optimizer, impl)}; on the "
                            "host (CPU offload): formulas/cpu_offload_time.py eq. (H4), all ranks of a machine "
                            "at once, not overlapped"))
    notes.append(Assumption(host.name, host.expected, True, host.source))
    notes.append(Assumption(eta.name, eta.expected, True, eta.source))
    if w.fsdp is not None and w.grad_accumulation > 1:
        warnings.append("FSDP CPU offload with gradient accumulation: from the second micro-step FSDP2 adds each "
                        "gradient on the host and copies it synchronously (_fsdp_collectives.py foreach_reduce lines "
                        "711-750); the addition is timed (eq. O3 at the host bandwidth), the lost copy overlap is not")
    # (offload optimizer with FSDP is refused by TrainingWorkload: FSDP has no optimizer-only offload)
    if w.fsdp is None:
        warnings.append(f"offload {w.offload} with DeepSpeed ZeRO: the host optimizer step is timed "
                        "(formulas/cpu_offload_time.py eq. (H4), its bytes per element as torch's fused AdamW's, not "
                        "DeepSpeedCPUAdam's), the parameter and gradient copies over the host link are not")
    return t_opt, t_acc


def _per_step_seconds(spec: ModelSpec, w: TrainingWorkload, trained: int, eta: float,
                      notes: list[Assumption]) -> tuple[float, float]:
    """(optimizer step, one gradient accumulation) seconds on one device (formulas/optimizer_step.py) at ``eta``
    bytes/s (the memory-bound kernel bandwidth): the element sizes, optimizer and implementation the memory estimate
    resolves (estimate/training/setup.py ``resolve``), the trained elements this device holds (sharded by ZeRO /
    FSDP)."""
    optimizer, impl, grad, per = _optimizer_step_setup(spec, w)
    local, local_g = _trained_per_device(spec, w, trained)
    t_opt = local * per / eta
    notes.append(Assumption("optimizer_step_bytes_per_element", per, True,
                            f"formulas/optimizer_step.py: {step_source(optimizer, impl)}; at the memory-bound "
                            "kernel bandwidth"))
    if w.accumulation_fused:  # eq. (O3) runs inside TE's wgrad GEMMs, but not for the parameters outside them
        notes.append(Assumption("gradient_accumulation_fusion", True, w.gradient_accumulation_fusion is None,
                                GRADIENT_ACCUMULATION_FUSION_WHY))
        unfused = 0 if w.adapters else unfused_elements(spec)
        if not unfused:
            return t_opt, 0.0
        _, grad_shards, _ = model_state_ways(w, w.shard_group)  # dense parameters: as _trained_per_device
        local_u = unfused / max(1, w.tp * w.pp) / grad_shards
        t_acc = local_u * megatron_accumulation_bytes(grad, float(training_context(spec, w).recipe.model_bytes)) / eta
        notes.append(Assumption("unfused_accumulation_elements", unfused, True, UNFUSED_ACCUMULATION_WHY))
        return t_opt, t_acc
    if w.precision in MEGATRON_PRECISIONS and not w.adapters:  # the DDP hook's main_grad.add_(param.grad), eq. (O3m)
        t_acc = local_g * megatron_accumulation_bytes(grad, float(training_context(spec, w).recipe.model_bytes)) / eta
        notes.append(Assumption("gradient_accumulation_fusion", False, False,
                                "Megatron's DDP backward hook adds each micro-batch's model-dtype gradient into "
                                "main_grad (formulas/optimizer_step.py eq. (O3m))"))
        return t_opt, t_acc
    return t_opt, local_g * accumulation_bytes(grad) / eta


def with_tp_replicated(spec: ModelSpec, w: TrainingWorkload, fl: TrainingFlops,
                       notes: list[Assumption]) -> TrainingFlops:
    """``fl`` with the FLOPs the tensor-parallel ranks run beyond the model's: each of the tp ranks runs the whole
    of the matrices ``w``'s framework keeps whole and feeds every token (``_tp_replicated_flops_per_token``: f per
    token), where the model's count has them once, so tp x (F - f)/tp + tp x f = F + (tp - 1) f per token. The run's
    total (tokens x FLOP/token) and the step time (each rank's 1/tp of it) count this same number."""
    if w.tp <= 1 or fl.tp_replicated:
        return fl
    f = _tp_replicated_flops_per_token(spec, w, fl, notes)
    return replace(fl, tp_replicated=(w.tp - 1) * f) if f else fl


def _tp_replicated_flops_per_token(spec: ModelSpec, w: TrainingWorkload, fl: TrainingFlops,
                                   notes: list[Assumption]) -> float:
    """Model FLOPs per token of the matrices ``w``'s framework keeps whole on each TP rank and runs on every token
    there (formulas/tensor_parallel.py ``full_token_replicated_elements``: Megatron-Core without sequence
    parallelism, torchtitan's MLA down-projections always): R x (F - F_attn) / N, their share of the parameter
    FLOPs of eqs. (1)-(2'), forward, backward and recomputation alike. Each TP rank runs all of it, so the step's
    division by tp leaves (tp - 1) x this per token to add back."""
    plan = training_tp_framework(w.precision, w.framework)
    repl = full_token_replicated_elements(spec, plan, w.sequence_parallel, w.ep)
    n = count_params(spec).active
    if not repl or n <= 0:
        return 0.0
    f = repl * (fl.per_token - fl.attention) / n
    notes.append(Assumption("tp_replicated_flops_per_token", round(f), True,
                            f"{plan}'s TP plan keeps {repl / 1e9:.4g} B matrix elements (MLA down-projections, "
                            "router) whole and runs them on every token of each TP rank"
                            + ("" if plan == "torchtitan" else " (no sequence parallelism)")
                            + ": their share of the parameter FLOPs, not divided by tp "
                            "(formulas/tensor_parallel.py full_token_replicated_elements)"))
    return f


def _expert_elements_trained(spec: ModelSpec, w: TrainingWorkload) -> tuple[int, int]:
    """(elements, tensor-parallel ways) of the trained routed-expert tensors that ``w`` places apart from the dense
    ones, as estimate/training/states.py ``stage_states`` places them: in full training the routed experts under
    expert parallelism or a stated Megatron expert TP other than tp, split etp (``expert_tp``) ways; in LoRA the
    routed experts' adapters under ep > 1 (formulas/lora.py ``LoraParams.experts_total``), which live with their
    experts and split ep ways only (states.py ``_rank_adapter_shapes``); else (0, 1). Both shard and reduce over
    the expert data-parallel group (setup.py ``expert_group``)."""
    if w.method == "full":
        e_tp = expert_tp(w)
        if w.ep > 1 or e_tp != w.tp:
            return count_params(spec).by_component.get("experts", 0), e_tp
        return 0, 1
    if w.adapters and w.ep > 1:
        return lora_params(spec, w.rank, w.targets, dora=w.dora).experts_total, 1
    return 0, 1


def dp_ring_shares(spec: ModelSpec, w: TrainingWorkload, trained: int) -> tuple[float, float]:
    """(dense, experts): eq. (1) of formulas/network.py without its factor 2, for each gradient ring a rank joins, in
    whole-model terms (the caller divides by tp x pp): the dense trained elements x (g - 1) / g over the dense
    data-parallel group g = gpus / (tp x pp); the routed experts (``_expert_elements_trained``: E elements split
    e_tp x ep ways, not tp) x tp / (e_tp x ep) x (g_e - 1) / g_e over their own group g_e (setup.py
    ``expert_group``: Megatron-Core's expert DDP buffers reduce on intra_expt_dp_group, NVIDIA/Megatron-LM
    @d98e8a64 distributed/distributed_data_parallel.py:285-289). Each share stands alone: with one dense replica
    (dp = 1) and etp < tp the experts still reduce over tp / etp ranks; with g_e = 1 they move nothing. The norm
    weights are not split by tensor parallelism (Megatron-Core's TENorm builds a whole ``hidden_size`` LayerNorm /
    RMSNorm on every TP rank, NVIDIA/Megatron-LM @d98e8a64 megatron/core/extensions/transformer_engine.py:1048-1100):
    trained in full, each TP rank's buffer holds them whole, so in whole-model terms they count tp times."""
    dp = max(1, w.gpus // max(1, w.tp * w.pp))
    experts, e_tp = _expert_elements_trained(spec, w)
    norms = count_params(spec).by_component.get("norm", 0) * (w.tp - 1) if w.method == "full" else 0
    dense = (trained - experts + norms) * (dp - 1) / dp
    if not experts:
        return dense, 0.0
    edp = expert_group(w)
    return dense, experts * w.tp / (e_tp * w.ep) * (edp - 1) / edp


def _fp8_param_elements(spec: ModelSpec) -> int:
    """The whole model's te linear weight elements held as float8 parameters under ``fp8_param_gather``
    (formulas/float8_training.py eq. T3; an MoE layer's attention only, as ``float8_time`` counts them)."""
    return sum(float8_weight_elements(spec, 1, k) for k in moe_kinds(spec))


def _dp_reduced_elements(w: TrainingWorkload, trained: int, rings: tuple[float, float]) -> float:
    """Trained elements of a data-parallel reduction over all ``w.gpus`` ranks (tp = pp = 1; and ZeRO-1/2's weight
    all-gather) whose ring moves (n - 1) / n of them: the ``rings`` of ``dp_ring_shares`` summed, over that share
    (``trained`` with one rank, which moves nothing)."""
    n = max(1, w.gpus // max(1, w.tp * w.pp))
    return sum(rings) * n / (n - 1) if n > 1 else float(trained)


def _trained_per_device(spec: ModelSpec, w: TrainingWorkload, trained: int) -> tuple[float, float]:
    """(optimizer-state elements, gradient elements) of the trained parameters one device holds: split over tp x pp,
    then partitioned as the memory estimate partitions them (training/setup.py ``model_state_ways`` over
    ``TrainingWorkload.shard_stage`` / ``shard_group``: FSDP hybrid shards within one node's GPUs only; Megatron's
    grad buffer whole at every stage). Under
    expert parallelism in full training the routed experts are split etp x ep ways (not tp) and partitioned over the expert
    data-parallel ranks (``expert_shard_group``), as estimate/training/states.py ``stage_states`` places them."""
    _, grad_shards, state_shards = model_state_ways(w, w.shard_group)
    ways = max(1, w.tp * w.pp)
    experts, e_tp = _expert_elements_trained(spec, w)
    dense = (trained - experts) / ways
    if not experts:
        return dense / state_shards, dense / grad_shards
    _, ge_shards, oe_shards = model_state_ways(w, expert_group(w))
    mine = experts / (w.pp * e_tp * w.ep)
    return dense / state_shards + mine / oe_shards, dense / grad_shards + mine / ge_shards


@lru_cache(maxsize=1024)
def _optimizer_step_setup(spec: ModelSpec, w: TrainingWorkload) -> tuple[str, str, float, float]:
    """(optimizer, implementation, gradient element size, optimizer-step bytes per trained element) as the memory
    estimate resolves them (estimate/training/setup.py ``resolve``); memoized on its immutable arguments (the same for every device of a catalog search)."""
    ctx = training_context(spec, w)
    rec = ctx.recipe
    if w.adapters:
        param = grad = float(ctx.adapter_bytes)
        master = 0.0
    else:
        param, grad, master = float(rec.model_bytes), float(rec.grad_bytes), float(rec.master_bytes)
    per = optimizer_step_bytes(ctx.optimizer.name, ctx.optimizer_impl, param, grad, float(ctx.state_bytes), master)
    return ctx.optimizer.name, ctx.optimizer_impl, grad, per


def network_for(w: TrainingWorkload, instance: Instance | None = None,
                hardware_files: Sequence[str | Path] = ()) -> Network | None:
    """The network between the machines of ``w`` (formulas/network.py eq. (11)): ``w.network`` as
    request/quantities.py ``parse_network`` reads it (a catalog interconnect of a network kind, per port times
    ``w.gpus_per_node``, or a bandwidth per machine), the reader a request's ``resources.network`` goes through too;
    else ``instance``'s own network; else None."""
    if w.network is None:
        if instance is not None and instance.network is not None:
            return Network(float(instance.network.base), f"{instance.id}'s network (catalog)", False)
        return None
    bw, what = parse_network(w.network, w.gpus_per_node, hardware_files)
    return Network(bw, what)


def training_peak(device: Device, precision: str = TrainingWorkload.precision, tf32: bool = False
                  ) -> tuple[float | None, str, bool, str | None]:
    """(peak FLOP/s, its key, timed with the CPU vector utilisation, a warning or None) a training run with
    ``precision`` is timed against, by the dtype its GEMMs run in: precision 'fp32' runs fp32 matmuls, at the FP32
    peak, or the TF32 tensor peak with ``tf32`` (device.fp32_matmul_peak, the one rule of an fp32 matmul; None where
    unsourced: not timed); every other recipe's GEMMs are 16-bit (autocast, or 16-bit weights): a GPU's dense BF16
    peak (FP16 where only it is listed, equal on Ampere and later). A CPU: its BF16 matrix peak (AMX, derived in the
    catalog) for a bf16 recipe where sourced, else its FP32 vector peak (True: timed with
    efficiency.TRAINING_UTILIZATION_CPU_VECTOR)."""
    peak, key = device.peak_flops("bf16")
    if device.kind == "cpu" and "bf16" in precision and peak is not None:
        return peak, key, False, None
    if device.kind == "cpu" or precision == "fp32":
        p32, key32, warning = fp32_matmul_peak(device, tf32)
        return p32, key32, device.kind == "cpu", warning
    return peak, key, False, None


def gemm_dtype_notes(device: Device, w: TrainingWorkload, key: str) -> list[Assumption]:
    """The assumptions of the dtype a GPU run's GEMMs are timed in (``key``: training_peak's): the tf32 setting, and
    for fp32 / tf32 GEMMs that the utilisation calibrated on BF16 runs (efficiency.TRAINING_UTILIZATION_BY_ARCH:
    no fp32 or tf32 training row is calibrated) is applied to them, as is the fused attention kernel's share."""
    if device.kind == "cpu":
        return []
    out = [Assumption("tf32", w.tf32, "tf32" not in (w.given or ()),
                      "given" if "tf32" in (w.given or ()) else TF32_DEFAULT_WHY)]
    if key in ("fp32", "tf32"):
        out.append(Assumption("gemm_peak_dtype", key, True,
                              f"precision fp32: every GEMM in fp32 operands, at the dense {key.upper()} peak"
                              + (" (TF32 tensor cores: tf32 on)" if key == "tf32" else " (CUDA cores: TF32 off)")
                              + "; the utilisation and the attention kernel's share are the BF16 runs' "
                              "(efficiency.TRAINING_UTILIZATION_BY_ARCH, no fp32/tf32 calibration row), applied "
                              "to the fp32 rates uncalibrated"))
    return out


def training_duration(spec: ModelSpec, device: Device, devices: int, tokens: float, *, method: str = "full",
                      seq_len: int = 2048, grad_checkpointing: str | None = None, utilization: float | None = None,
                      rank: int = 16, targets: tuple[str, ...] | str = TrainingWorkload.targets,
                      flops: TrainingFlops | None = None, workload: TrainingWorkload | None = None,
                      link_bandwidth: float | None = None, paged_bytes: float = 0.0,
                      network: Network | None = None, paged_free_bytes: float | None = None,
                      offloaded_bytes: float | None = None) -> Duration:
    """Eqs. (6)-(8) of formulas/training_time.py for this model, method and device: per-device compute at the
    achieved utilisation of the executed FLOPs, data-parallel communication over the interconnect (overlapped),
    optimizer paging (``paged_bytes`` of states, ``paged_free_bytes`` the device memory the step leaves them, eq.
    (12); None: not known, every byte moves). ``workload`` gives the full settings (devices, sharding, micro-batch, grad accumulation);
    without it one data-parallel replica per device with the method/sequence given here. Tensor/pipeline-parallel
    runs: each device's share of the GEMMs at the same utilisation, plus formulas/model_parallel_time.py's
    tensor-parallel collectives, point-to-point transfers, bubble and gradient all-reduce (estimate/model_parallel.py).
    ``flops``: the FLOP count of these same settings when the caller already has it. ``offloaded_bytes``: the
    memory estimate's activations in host memory (activation_offload; None: read from it here)."""
    tokens = float(read_number(tokens, "tokens", TRAIN_TOKENS))  # a Python caller's "1B": one line, not a TypeError
    # no checkpointing given (None): the method's default (specs/training.py default_grad_checkpointing)
    w = workload or TrainingWorkload(method=method, seq_len=seq_len,
                                     grad_checkpointing=grad_checkpointing,  # type: ignore[arg-type]
                                     rank=rank, targets=normalize_targets(targets), gpus=devices)
    spec, w = with_framework(spec, w)  # the framework profile's defaults (estimate/framework.py)
    recompute = recompute_mode(w.grad_checkpointing)
    fl = flops or flops_per_token(spec, w.method, w.seq_len, recompute, w.rank, w.targets, w.checkpoint_every,
                                  recomputes_whole_layer(w.checkpoint_impl), recomputed_matmul_modules(w))
    own = True
    peak, key, cpu_vector, peak_warning = training_peak(device, w.precision, w.tf32)
    if device.kind == "cpu":
        factor = E.TRAINING_UTILIZATION_CPU_VECTOR if cpu_vector else E.TRAINING_UTILIZATION_CPU_AMX
    else:
        capability = cuda_capability(device)
        factor, own = E.training_utilization(device.architecture, capability)
    # a given utilisation in the range `--utilization` and a request file's take (numbers.UTILIZATION), one line
    u = check_number(utilization, "utilization", UTILIZATION) if utilization is not None else factor.expected
    u_source = factor.source if utilization is None else "given"  # a calibration row does not stand behind a given u
    repl_notes: list[Assumption] = []
    fl = with_tp_replicated(spec, w, fl, repl_notes)
    notes = [Assumption("utilization", u, utilization is None, u_source),
             Assumption("flops_per_token", round(fl.effective_per_token(w.micro_batch)), True,
                        f"{fl.effective_formula(w.micro_batch)} ({fl.source})"), *repl_notes]
    numa = numa_assumption(device)  # a detected machine of several sockets: its bandwidth and compute sockets
    if numa is not None:
        notes.append(numa)
    warnings: list[str] = [peak_warning] if peak_warning else []
    notes.extend(gemm_dtype_notes(device, w, key))
    no_band = ""
    if not own:  # no calibration row for the architecture: no calibrated range either (ranges.py)
        arch = device.architecture or (device.kind if device.kind not in ("gpu", "") else "unknown")
        if device.architecture in E.CALIBRATED_CAPABILITIES:  # the architecture's row covers other parts of it
            arch = f"{arch} (compute capability {capability // 10}.{capability % 10})" if capability else arch
        no_band = R.UNCALIBRATED_ARCH_TRAINING_NO_BAND
        notes.append(Assumption("training_range_band", "none", True, f"no {R.TRAINING_SPEED} band: {no_band}"))
        if utilization is None:
            notes.append(Assumption("utilization_architecture", arch, True, factor.source))
            warnings.append(f"{device.id}: no training calibration row for GPU architecture {arch!r}; its "
                            f"utilisation is the lowest fitted share of {'/'.join(E.stand_in_architectures(arch))} "
                            f"({factor.expected:.3g}), an uncalibrated stand-in: "
                            f"{R.uncalibrated_training_note(arch)}; no calibrated range")
    # PyTorch-native tensor parallelism (not Megatron-Core's plan, whose runs those rows do not measure; no Megatron
    # backward overlap), bf16 or rowwise float8: what the published
    # torchtitan TP rows measured (ranges.TENSOR_PARALLEL_TRAINING_MEASURED); rowwise with high-precision weight
    # gradients: that it has no such row (ranges.NO_TENSOR_PARALLEL_TRAINING_ROW)
    if w.tp > 1 and device.kind == "gpu" and not w.tp_backward_overlap and (
            training_tp_framework(w.precision, w.framework) != "megatron-core") and (
            not w.float8 or w.float8_recipe in ("torchao-rowwise", "torchao-rowwise-gw-hp")):
        tp_note = R.tensor_parallel_training_note("bf16" if not w.float8 else w.float8_recipe)
        if tp_note:
            warnings.append(tp_note)
    if w.method == "qlora" and qlora_base_format(spec) == "gptq-int4":
        notes.append(Assumption("gptq_dequant_bytes_per_weight", GPTQ_DEQUANT_BYTES_PER_WEIGHT, True,
                                "formulas/training_time.py eq. (9b): auto-gptq qlinear_cuda_old QuantLinear above "
                                "128 rows unpacks every int4 weight with eager PyTorch ops in forward and recomputed "
                                "forward (torch.matmul saves the fp16 weight for the backward), 9 kernels per linear "
                                "and pass (formulas/launch_overhead.py eq. K8), at the memory-bound kernels' share of "
                                "the bandwidth"))
    elif w.method == "qlora":
        notes.append(Assumption("nf4_dequant_bytes_per_weight", 2.640625, True,
                                "formulas/training_time.py eq. (9): bitsandbytes MatMul4Bit / torchao LinearNF4 "
                                "dequantize every 4-bit weight in forward, backward and recomputed forward, at the "
                                "memory-bound kernels' share of the bandwidth"))
    if peak is not None and w.tf32 and math_kernel_untimed(spec, w, device, fl):
        # SDPA's math kernel's fp32 score matmuls under tf32 on a GPU with TF32 units and no sourced TF32 figure:
        # refused as the fp32 GEMMs are (device.fp32_matmul_peak returns None), not timed at the BF16 peak
        peak, key = None, "tf32"
    if peak is None:
        warnings.append(f"{device.id} has no sourced {key} peak FLOP/s: duration not estimated"
                        + (f" (give a catalog CPU with --device and the machine's RAM with --memory, which a catalog "
                           f"CPU does not state, e.g. --device {CPU_EXAMPLES[0]} --memory 256GiB (or "
                           f"{', '.join(CPU_EXAMPLES[1:])}), or a --hardware-file "
                           "CPU entry with flops.fp32, and flops.bf16 for an AMX part: cores x all-core clock x FLOP "
                           "per cycle)" if device.kind == "cpu" else ""))
        return Duration(tokens, devices, fl, None, key, u, u_source, None, tuple(notes), tuple(warnings),
                        micro_batch=w.micro_batch, no_band=no_band)
    # MFU's count: this method's FLOPs with no recomputation (and none of the tensor-parallel repeats), eq. (1)/(4)
    mfl = flops_per_token(spec, w.method, w.seq_len, "none", w.rank, w.targets)
    if offloaded_bytes is None:
        offloaded_bytes = offloaded_activation_bytes(spec, w) if w.activation_offload else 0.0
    st = step_time(spec, device, w, fl, peak, u, link_bandwidth, paged_bytes, notes, warnings, network,
                   paged_free_bytes, offloaded_bytes)
    comm_bound = comm_bound_warning(st)
    if comm_bound:
        warnings.append(comm_bound)
    secs = tokens / st.tokens_per_second
    gemm = key if device.kind == "cpu" or key in ("fp32", "tf32") else "fp16" if "fp16" in w.precision else "bf16"
    return Duration(tokens, devices, fl, peak, key, u, u_source, secs, tuple(notes), tuple(warnings), st, w.micro_batch,
                    no_band, mfl.effective_per_token(w.micro_batch), mfl.formula, gemm)


# Warn when communication that compute does not hide takes more than this share of each optimizer step
# (StepTime.comm_share: formulas/training_time.py eqs. (8'), (8''); a model-parallel run's formulas/model_parallel_time.py
# eq. (P6)): the interconnect then sets the run's speed, the devices wait on it for most of the wall clock (and of the
# price). A threshold for a warning, not a fitted constant (as engines.PREFILL_SHARE_WARN). train, fit --train,
# recommend --train and plan all say it (comm_bound_warning); the plan as its 'network-bound' check (review32 D2).
COMM_BOUND_SHARE = 0.5
COMM_BOUND_REMEDY = "faster interconnect, ZeRO stage with less traffic, or larger gradient accumulation"
COMM_BOUND_ACROSS = "fewer machines, "  # said only where the step's collectives cross machines (probe25 C5)
COMM_BOUND_HEAD = "communication-bound: "


def comm_bound_message(step: StepTime | None) -> str | None:
    """What a step past COMM_BOUND_SHARE of exposed communication means, in words (None below it): the plan's
    'network-bound' check's message, with COMM_BOUND_REMEDY its remedy."""
    share = step.comm_share if step is not None else 0.0
    if not share > COMM_BOUND_SHARE:
        return None
    return (f"communication that compute does not hide takes {share:.0%} of each step: the interconnect between "
            "devices limits training speed")


def comm_bound_remedy(step: StepTime | None) -> str:
    """COMM_BOUND_REMEDY, with fewer machines first where the step's collectives cross machines (topology
    'multi-node'); a run inside one machine (2 x RTX 4090 over PCIe) has no machine to drop."""
    across = step is not None and step.topology == "multi-node"
    return (COMM_BOUND_ACROSS if across else "") + COMM_BOUND_REMEDY


def comm_bound_warning(step: StepTime | None) -> str | None:
    """The duration's warning of a communication-bound step (``comm_bound_message`` with its remedy), None below
    COMM_BOUND_SHARE: one home for train, fit --train, recommend --train and the plan."""
    message = comm_bound_message(step)
    return None if message is None else f"{COMM_BOUND_HEAD}{message} ({comm_bound_remedy(step)})"


# A training run with no deadline given is judged against a practical limit: an option that would take longer is
# rejected as "too slow", not listed as meeting every constraint (a 25-year CPU run beside 4-hour GPU runs). 90 days
# is a policy default, not a measured bound: a quarter's hardware lease, about the length of one published frontier
# pre-training run (Llama 3.1 405B: 30.84M H100-hours on up to 16,384 H100s, the Llama 3.1 model card's "Training
# Factors", i.e. about 78 days at that size; the "54-day" of Dubey et al. 2024 section 3.3.4 is a snapshot window of
# that run, not its length). --deadline (the request's deadline) replaces it, longer or shorter. Serving's
# counterpart is the reading-speed floor.
# train / fit --train --tokens warn past it (training_time_on: practical_limit_warning).
PRACTICAL_TRAINING_SECONDS = 90 * 86400.0


OFFLOADED_ITEM = "host_offloaded_activations"  # estimate/training/compose.py's item of activation_offload


def offloaded_activation_bytes(spec: ModelSpec, w: TrainingWorkload) -> float:
    """The saved activations activation_offload copies to host memory per micro-step [B]: the memory estimate's
    item."""
    return float(sum(i.bytes for i in estimate_items(spec, w) if i.name == OFFLOADED_ITEM))


def training_duration_for(spec: ModelSpec, device: Device, devices: int, tokens: float, fields: dict[str, Any],
                          utilization: float | None = None, instance: Instance | None = None,
                          hardware_files: Sequence[str | Path] = (), link_bandwidth: float | None = None) -> Duration:
    """``training_duration`` for TrainingWorkload keyword ``fields`` (method, seq_len, grad_checkpointing, rank,
    targets; the dataclass defaults otherwise). The devices talk over ``instance``'s interconnect when one is given
    (its own link, e.g. an NVLink/NVSwitch server of PCIe-listed cards), else the device's (``fit.link_bandwidth_for``,
    the rule inference's tensor parallelism reads too); ``link_bandwidth``: a link a plan's request names instead.
    The workload is on ``device``'s kind (``workload_device_kind``, as fit's memory estimate): a CPU has no CUDA
    unified memory, so QLoRA there keeps AdamW states in RAM and pays no paging term (t_page, formulas/training_time.py)."""
    kw = {k: v for k, v in fields.items() if k in TrainingWorkload.__dataclass_fields__}
    kw["gpus"] = devices
    kw.update(training_device_fields(device))
    if instance is not None and "gpus_per_node" not in kw:
        kw["gpus_per_node"] = instance.device_count  # an instance is one machine
    w = training_workload(kw)  # one object per fields: the same for every device of a catalog search
    items = estimate_items(spec, w)
    paged = sum(i.bytes for i in items if i.name == "paged_optimizer_states")
    free = None
    if paged:  # eq. (12): what the step's device tensors (the memory estimate's expected total) leave the states
        usable, _ = usable_memory(device, w.memory, record=False)
        if usable is not None:
            free = float(usable - sum(i.bytes for i in items if i.location == "device"))
    offloaded = float(sum(i.bytes for i in items if i.name == OFFLOADED_ITEM))
    return training_duration(spec, device, devices, tokens, utilization=utilization, workload=w, offloaded_bytes=offloaded,
                             link_bandwidth=(link_bandwidth or link_bandwidth_for(device, instance, hardware_files)
                                             if devices > 1 else None),
                             paged_bytes=paged, network=network_for(w, instance, hardware_files),
                             paged_free_bytes=free)


def practical_limit_warning(dur: Duration) -> Duration:
    """``dur`` with a warning when the run is past PRACTICAL_TRAINING_SECONDS: the devices that would bring it under
    at linear scaling, ceil(devices x seconds / limit) (a lower bound: the collectives grow with the devices;
    ``recommend --train`` scales out with them timed)."""
    if not dur.seconds or dur.seconds <= PRACTICAL_TRAINING_SECONDS:
        return dur
    need = math.ceil(dur.devices * dur.seconds / PRACTICAL_TRAINING_SECONDS)
    text = (f"{format_seconds(dur.seconds)} on {dur.devices} device(s) is past the "
            f"{format_seconds(PRACTICAL_TRAINING_SECONDS)} practical limit of a training run (the one recommend and "
            f"plan apply): about {need} devices would bring it under at linear scaling, a lower bound as the "
            f"collectives grow (recommend --train --tokens sizes it with them timed)")
    return replace(dur, warnings=(*dur.warnings, text))


def training_time_on(spec: ModelSpec, hardware: str | Device | Instance, devices: int, tokens: float,
                     fields: dict[str, Any], utilization: float | None = None, kwh_price: float | None = None,
                     hardware_files: Sequence[str | Path] = (), limit_warning: bool = True
                     ) -> tuple[Duration, float | None, float | None]:
    """(duration, USD per hour, USD for the run) of training on ``tokens`` with ``devices`` x ``hardware`` (a device,
    or an instance: a CPU VM is timed on its share of the socket, ``fit.vm_share_device``), priced by
    ``fit.hourly_price``: the one composition ``fit --train --tokens``, ``train --device --tokens`` and the Python
    API's ``fit_training(tokens=...)`` read. ``limit_warning``: warn past the practical limit
    (``practical_limit_warning``; False for a search that applies the limit itself, recommend)."""
    device, _, _, instance = resolve_target(hardware, hardware_files)
    dur = training_duration_for(spec, vm_share_device(device, instance), devices, tokens, fields, utilization, instance,
                                hardware_files)
    if instance is None and fields.get("gpus_per_node") is None and (
            domain := default_machine_size(device, int(fields.get("gpus") or devices))) is not None:
        dur = replace(dur, warnings=(*dur.warnings, domain[1]))  # an NVL72 rack's domain: said, not assumed (fit.py)
    if limit_warning:
        dur = practical_limit_warning(dur)
    price = hourly_price(device, devices, instance, kwh_price)[0]
    return dur, price, run_cost(price, dur.seconds) if price is not None and dur.seconds else None
