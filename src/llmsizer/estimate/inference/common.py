"""Shared pieces of the inference composition: the accumulator and the items every engine reports."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ...formulas.kv_cache import (
    KV_DTYPE_HEAD_SCALE_BYTES,
    ds_mla_bytes_per_token_layer,
    kv_cache,
    kv_dtype_bytes,
    kv_dtype_name,
)
from ...formulas.recurrent_state import RecurrentState, extra_groups, layer_state_bytes_per_device, recurrent_state
from ...formulas.tensor_parallel import activation_split, kv_fraction_per_device, per_device
from ...formulas.weight_formats import WeightBytes
from ...result import Assumption, Item, Location, Notes
from ...specs import InferenceWorkload, ModelSpec
from ...units import format_bytes
from .. import engines as E
from .media import Media


class Acc(Notes):
    """Collects items, assumptions and warnings while an estimate is composed."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[Item] = []

    def span(self, name: str, span: E.Span, location: Location = "device", formula: str = "") -> None:
        self.items.append(Item(name, span.expected, location, span.low, span.high,
                               formula or "named constant (estimate/engines.py)", span.source))


# The driver's reserve one published nvidia-smi -q shows (H100 80GB HBM3, driver 590.48.01: FB Memory Usage Total
# 81559 MiB, Reserved 479 MiB; tests/fixtures/real_outputs/nvidia-smi-q/h100-80gb-hbm3.txt), named where a device
# has no sourced CUDA total: what its memory is then taken too large by, at most of this order (L40S 609 MiB, RTX 4080
# SUPER 434 MiB, the same captures; H200 615 MiB, validation/measured/gpu-h200-2026-12-04.jsonl)
CUDA_RESERVE_EXAMPLE = "479 MiB on an H100 80GB HBM3 with driver 590.48.01, 609 MiB on an L40S with 595.80"


def cuda_total(acc: Acc, w: InferenceWorkload, reader: str) -> int:
    """The device total ``reader`` (an engine's rule) reads from CUDA, torch.cuda.mem_get_info's total: the
    workload's ``cuda_memory`` (the catalog's sourced figure, estimate/device.py ``cuda_memory``), else its
    ``memory`` taken as it; the assumption names which. Only with a memory (``w.memory`` not None)."""
    memory = int(w.memory or 0)
    if w.cuda_memory is not None:
        acc.assumptions.append(Assumption(
            "cuda_total_memory", format_bytes(w.cuda_memory), True,
            f"{reader} reads CUDA's total (torch.cuda.mem_get_info), {format_bytes(memory - w.cuda_memory)} below "
            f"the device's {format_bytes(memory)}: what the driver reserves for itself (nvidia-smi -q 'FB Memory "
            "Usage / Reserved'); the device's memory_cuda, with its source (hardware show: a catalog row's figure, "
            "or Total less the Reserved line `hardware detect` read)"))
        return int(w.cuda_memory)
    acc.assumptions.append(Assumption(
        "cuda_total_memory", format_bytes(memory), True,
        f"{reader} reads CUDA's total (torch.cuda.mem_get_info), taken as the memory: no CUDA total is sourced for "
        "this device, or the memory was given. Where it is nvidia-smi's memory.total, CUDA's is smaller by what the "
        f"driver reserves ({CUDA_RESERVE_EXAMPLE}; nvidia-smi -q 'FB Memory Usage / Reserved'): give --memory as "
        "CUDA's total (torch.cuda.mem_get_info()[1]) for the exact pool"))
    return memory


@dataclass
class Context:
    spec: ModelSpec
    w: InferenceWorkload
    wb: WeightBytes
    fmt: str
    kv_dtype: str
    act_bytes: int
    profile: E.EngineProfile
    acc: Acc
    media: Media | None = None  # images / video in each prompt (media.py); their tokens are already in w.context
    details: dict[str, Any] = field(default_factory=dict)
    dtype: str = "bf16"  # the compute (activation) dtype
    # the KV cache grows by concatenation (transformers' DynamicCache, allocator.py ConcatGrowth): read by the
    # metric's reserve (allocator.py apply_metric); None: a cache that does not, or outside eq. C1''s regime
    kv_growth: Any = None
    # the weights' quantization group (a grouped format's, compose.py ``_resolve_weights``), which the details record
    group: int | None = None
    # what an engine's composition sized that its figures at the concurrency read, where it can re-derive them at
    # another concurrency (vllm.py ``vllm_at_concurrency``: its sizing and admitted sequences); None: it cannot
    load: Any = None
    # the share of the model's per-token KV cache this device's pipeline stage holds (pipeline.py kv_stage_share;
    # 1: no pipeline parallelism), multiplied into the tensor-parallel share wherever an engine sizes its cache
    kv_stage_share: float = 1.0
    # the device is on a replica's last pipeline stage (or there is none): vLLM's profile run samples only there
    # (v1/worker/gpu_model_runner.py profile_run lines 5785-5789, vLLM 0.19.1: ``if get_pp_group().is_last_rank``)
    last_stage: bool = True


def running_sequences(w: InferenceWorkload, cap: int | None, admits: int | None = None) -> int:
    """Sequences the engine runs at once; the rest of ``w.concurrency`` wait in its queue:

        running = min(concurrency, cap, admits)                                                    (R1)

    ``cap``: the engine's limit on running sequences, given or its default (vLLM ``max_num_seqs``: the scheduler
    takes no waiting request once ``len(self.running) == self.max_num_running_reqs``, which is
    ``scheduler_config.max_num_seqs``, vllm/v1/core/sched/scheduler.py ``Scheduler.schedule``; its default by GPU in
    ``vllm.py`` ``vllm_max_num_seqs``; SGLang ``max_running_requests``,
    ``sglang.py`` eq. 4); None: the engine batches every sequence it is given (transformers, llama.cpp's slots).
    ``admits``: the sequences of the full context the engine's KV pool holds, where the engine keeps the others
    waiting (vLLM: in ``Scheduler.schedule``'s loop over the waiting queue a request whose
    ``kv_cache_manager.allocate_slots`` returns None ends the loop ("The request cannot be scheduled": it stays in
    ``self.waiting``), and a running request that cannot grow preempts the newest running one back to the waiting
    queue, vllm/v1/core/sched/scheduler.py @00024d31; SGLang: a request is admitted only while the token pool has room
    for it); None: no pool (the engine allocates for every sequence). Every surface reads this one number: the
    queued requests are eq. (R2) ``concurrency - running`` (compose.py ``queued_sequences``), the queue's wait is
    formulas/serving_queue.py eq. Q3 over ``running`` slots. Memory is sized for ``min(concurrency, cap)``
    (``need_sequences``): what the engine would run with room for it; a pool that holds fewer (``admits``) is the
    fit's 'does not fit', with ``admits`` running and the rest queued. The arithmetic: ``running_and_queued``."""
    return running_and_queued(w.concurrency, cap, admits)[0]


def running_and_queued(concurrency: int, *bounds: int | None) -> tuple[int, int]:
    """Eq. (R1) and its remainder, the one home of both (every surface calls this): of ``concurrency`` requests in
    flight, (running, queued) where ``bounds`` limit the sequences run at once (an engine's running cap, its pool's
    room; over r replicas, one replica's running x r); None: no bound::

        running = max(0, min(concurrency, *bounds))                                                (R1)
        queued = concurrency - running                                                             (R2)
    """
    running = max(0, min([concurrency, *(b for b in bounds if b is not None)]))
    return running, concurrency - running


def weights_item(wb: WeightBytes, location: Location, nbytes: int | None = None, note: str = "") -> Item:
    parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in sorted(wb.by_storage.items(), key=lambda kv: -kv[1]))
    return Item("weights", wb.total if nbytes is None else nbytes, location,
                formula=f"sum over tensors in format {wb.format} ({parts}){note}",
                source="formulas/weight_formats.py (per-format rules and references)")


def kv_item(ctx: Context, tokens: int, seqs: int, location: Location, *, block: int | None = None,
            window_extra: int | None = None, name: str = "kv_cache", seqs_label: str = "seqs",
            sliding_block: int | None = None) -> Item:
    spec, prof = ctx.spec, ctx.profile
    extra = prof.window_extra if window_extra is None else window_extra
    layout = E.kv_layout(prof.name, kv_dtype_name(ctx.kv_dtype), ctx.act_bytes)  # eq. (6): transformers' groups
    kv = kv_cache(spec, tokens, seqs, ctx.kv_dtype, mla_mode=prof.mla_mode, window_extra=extra, block_size=block,
                  indexer_cache=prof.dsa_indexer_cache, repeated_kv=prof.caches_repeated_kv,
                  sliding_block_size=sliding_block, latent_cache=prof.dsa_latent_cache, **layout)
    tp = ctx.w.tensor_parallel
    share = kv_fraction_per_device(spec, tp, prof.mla_mode == "latent", prof.name) * ctx.kv_stage_share
    layers = f"{kv.full_layers} full layers x {kv.tokens_full} tokens"
    if kv.sliding_layers:
        layers += f" + {kv.sliding_layers} sliding layers x {kv.tokens_sliding} tokens"
    if spec.full_head_dim and spec.mla is None:  # Gemma 4: each layer kind caches its own head size
        layers = (f"{kv.full_layers} full layers x {kv.tokens_full} tokens x {spec.full_head_dim} head_dim + "
                  f"{kv.sliding_layers} sliding layers x {kv.tokens_sliding} tokens x {spec.head_dim} head_dim")
    if spec.mla is not None:
        per = "(kv_lora_rank + qk_rope_head_dim)" if prof.mla_mode == "latent" else "expanded MLA K and V"
        if prof.mla_mode == "latent" and ds_mla_bytes_per_token_layer(spec, ctx.kv_dtype, prof.dsa_latent_cache):
            per = "fp8_ds_mla row (kv_lora_rank e4m3 + fp32 scale per 128 + qk_rope_head_dim bf16, eq. 7)"
        if spec.mla.index_head_dim:
            per += f" + DSA indexer key ({prof.dsa_indexer_cache}, eq. 3)"
    elif prof.caches_repeated_kv and spec.kv_repeated_in_transformers:
        per = (f"2 x {spec.num_heads} heads (K/V repeated to every query head before caching) x {spec.head_dim} "
               "head_dim")
    elif spec.full_head_dim:
        per = f"2 x {spec.num_kv_heads} kv_heads"
    else:
        per = f"2 x {spec.num_kv_heads} kv_heads x {spec.head_dim} head_dim"
    tp_note = f" x {share:g} per device (TP {tp})" if tp > 1 else ""
    scale_bytes = KV_DTYPE_HEAD_SCALE_BYTES.get(kv_dtype_name(ctx.kv_dtype))
    if scale_bytes:
        tp_note += f"; + a {scale_bytes:g} B scale per token, KV head, K and V (eq. 5)"
    if layout:
        tp_note += (f"; + a scale and a zero ({layout['group_param_bytes']:g} B) per {layout['q_group_size']} values, "
                    f"up to the last {layout['residual_tokens']} tokens unquantized at {layout['residual_bytes']:g} B "
                    "(QuantizedCache, eq. 6)")
    return Item(name, per_device(kv.total_bytes, share), location,
                formula=f"({layers}) x {per} x {kv_dtype_bytes(ctx.kv_dtype):g} B ({ctx.kv_dtype}) x {seqs} {seqs_label}"
                        + tp_note,
                source="formulas/kv_cache.py eqs. (1)-(2), (5)-(6): Pope et al. 2022; DeepSeek-V2 eqs. 10-11")


_CACHE_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def state_dtypes(ctx: Context) -> tuple[str, str]:
    """(conv, SSM) state dtypes of this engine (EngineProfile.state_dtypes; "model" = the activation dtype). vLLM keeps
    the SSM state in the config's mamba_ssm_cache_dtype where the model's config hook reads it (Nemotron-H)."""
    conv, ssm = (ctx.dtype if d == "model" else d for d in ctx.profile.state_dtypes)
    r = ctx.spec.recurrent
    if ctx.profile.name == "vllm" and r is not None and r.ssm_cache_dtype:
        ssm = _CACHE_DTYPES[r.ssm_cache_dtype]
    return conv, ssm


def state_of(ctx: Context, seqs: int) -> RecurrentState:
    """The recurrent state of ``seqs`` sequences under this engine's rules (formulas/recurrent_state.py)."""
    conv, ssm = state_dtypes(ctx)
    return recurrent_state(ctx.spec, seqs, kv_dtype_bytes(conv), kv_dtype_bytes(ssm), ctx.profile.conv_state_window)


def state_item(ctx: Context, seqs: int, location: Location, *, page_per_device: int | None = None,
               name: str = "recurrent_state") -> Item:
    """The per-sequence conv + SSM state of the recurrent layers, independent of the context (eqs. 1-3 of
    formulas/recurrent_state.py), split evenly over the tensor-parallel GPUs where the engine splits the mixer
    (``activation_split``; transformers' plans leave it whole on every rank); ``page_per_device``: vLLM's page per
    layer and sequence on one GPU instead (its own TP shard, eq. 4, padded to the attention page)."""
    st = state_of(ctx, seqs)
    r = ctx.spec.recurrent
    if r is None:
        raise ValueError(f"{ctx.spec.name} has no recurrent layers")
    conv, ssm = state_dtypes(ctx)
    tp = ctx.w.tensor_parallel
    # eq. (4): a sharded Mamba-2 layer carries 2 x extra_groups x d_state replicated B/C channels (one rule:
    # formulas/recurrent_state.py extra_groups), so the printed channels add up to the shard's bytes
    extra = (2 * extra_groups(r.n_groups, tp, ctx.spec.name) * r.d_state
             if page_per_device is not None and r.kind == "mamba2" else 0)
    channels = (f"{r.conv_channels + extra} ch (incl. {extra} replicated group channels, eq. 4)" if extra
                else f"{r.conv_channels} ch")
    per_layer = f"(conv {channels} x {st.conv_len} x {kv_dtype_bytes(conv):g} B ({conv}) + ssm {r.d_inner} x " \
                f"{r.d_state} x {kv_dtype_bytes(ssm):g} B ({ssm}))"
    if page_per_device is not None:
        # a pipeline stage holds its share of the pages (pipeline.py kv_stage_share; 1 without stages)
        nbytes = math.ceil(page_per_device * st.layers * seqs * ctx.kv_stage_share)
        # the shard each GPU holds (eq. 4), then the page vLLM gives it (padded to the attention page in a hybrid)
        shard = layer_state_bytes_per_device(ctx.spec, tp, kv_dtype_bytes(conv), kv_dtype_bytes(ssm),
                                             ctx.profile.conv_state_window)
        if tp > 1:
            per_layer += f" / {tp} (TP shard, formulas/recurrent_state.py eq. 4) = {format_bytes(shard)} per device"
        per_layer += (f", padded to a {format_bytes(page_per_device)} page (the attention page)"
                      if page_per_device > math.ceil(shard) else f", a {format_bytes(page_per_device)} page")
        tp_note = ""
    else:
        ways = activation_split(ctx.profile.name, ctx.spec.model_type).ways("mixer", tp)
        nbytes = per_device(st.total_bytes, 1 / ways if ways > 1 else 1.0)
        tp_note = (f" / {tp} per device (TP {tp})" if ways > 1 else
                   f"; whole on each of the {tp} devices (the TP plan splits no mixer)" if tp > 1 else "")
    return Item(name, nbytes, location,
                formula=f"{st.layers} {r.kind} layers x {per_layer} x {seqs} seqs{tp_note}"
                        + (f" x {ctx.kv_stage_share:.4g} (this pipeline stage's share, pipeline.py kv_stage_share)"
                           if ctx.kv_stage_share != 1 and page_per_device is not None else "")
                        + "; independent of the context",
                source="formulas/recurrent_state.py eqs. (1)-(3); " + ctx.profile.state_source)
