"""Training / fine-tuning memory: the composition layer. Unpacks specs, calls formulas, records every default.

    device peak = max over the moments of a step (timeline.py) of
                  model states (states.py) + saved activations + transients

for the most loaded device (pipeline stage); host RAM items when offloading. Each item names its formula
module; the explanation of the precision recipe (16 vs 18 bytes per parameter) is an assumption of its own.
"""

from __future__ import annotations

import marshal
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from operator import itemgetter
from typing import Any, NamedTuple

from ...catalog.hardware import Device
from ...errors import FieldError, InputError
from ...formulas.context_parallel import TE_CP_SOURCE, ULYSSES_SOURCE
from ...formulas.float8_training import (
    FP8_PARAM_SOURCE,
    MXFP8_BLOCK,
    MXFP8_SOURCE,
    TE_MXFP8,
    TE_RECIPES,
    TE_SOURCE,
    TORCHAO_RECIPES,
    fp8_param_bytes,
    te_weight_copy_bytes,
)
from ...formulas.nf4_quantization import FUSED_EXPERTS_SOURCE
from ...formulas.parallelism import (
    DDP_BUCKET_CAP_BYTES,
    MOE_CAPACITY_FACTOR,
    megatron_interleaved_split,
    pipeline_stage_layers,
)
from ...formulas.params import count_params
from ...formulas.selective_checkpointing import op_sac_saved_terms
from ...formulas.tensor_parallel import training_tp_framework
from ...formulas.tensors import layer_keys
from ...formulas.training_activations import checkpoint_input_bytes, korthikanti_layer_bytes
from ...formulas.training_states import optimizer_info, recipe, state_bytes_per_param
from ...formulas.weight_formats import FUSED_KEPT, GROUP_SIZE_DEFAULT, weight_bytes
from ...frozen import replace_checked
from ...result import Assumption, Estimate, Item, KindedWarning, Notes
from ...specs import ModelSpec, TrainingWorkload
from ...specs.training import POOL_METRICS, check_whole_machines
from ...units import format_bytes, format_count
from .. import engines as E
from ..allocator import TRAINING, apply_metric, calibrated_need, device_context, training_side_streams
from ..device import detect_named, detected_machine, refuse_training_apart, resolve_target, workload_on_device
from ..framework import with_framework
from ..inference import inference_sized, inference_sized_floor
from ..inference.common import Acc
from ..model_warnings import model_note_assumptions, model_warnings, mtp_assumptions, refuse_unmodelled
from ..ranges import PYTORCH_TRAINING, TRAINING_MEMORY
from ..verdict import check_headroom, decimal_memory_note, fits_budget, headroom_assumption, memory_verdict
from .gather_units import float8_all_gather
from .levers import inference_comparable
from .setup import (
    TrainingContext,
    check_framework_layout,
    compile_partitions_layers,
    expert_group,
    expert_tp,
    model_state_ways,
    record_workload,
    refuse_attention_kernel,
    resolve,
    te_first_microbatch_cache,
)
from .states import StageStates, stage_states
from .timeline import (
    StageTimeline,
    eager_loss_events_of,
    fsdp2_copy_in_events,
    pipeline_fsdp2,
    stage_timeline,
    traced_units_layout,
)

RECIPE_SRC = "formulas/training_states.py (recipe table: ZeRO paper, HF model_memory_anatomy, Megatron-LM)"
ACT_SRC = "formulas/training_activations.py (Korthikanti et al. 2022 eq. 1, structure-aware terms)"
OFFLOAD_SRC = "torchtune training/_activation_offloading.py OffloadActivations"
PAR_SRC = "formulas/parallelism.py (ZeRO section 5, FSDP, Megatron TP, 1F1B pipeline)"

WHY_16_VS_18 = (
    "16 B/param (ZeRO paper: 2 fp16 weights + 2 fp16 grads + 4 fp32 master + 8 Adam) describes DeepSpeed-style "
    "training that stores the model in half precision with a separate fp32 master copy; 18 B/param (HF docs: "
    "6 weights = fp32 + half copy, 4 fp32 grads, 8 Adam) describes PyTorch AMP / HF Trainer, where the fp32 "
    "model is the master, autocast makes the half copy, and gradients are fp32. Megatron bf16 is also 18 "
    "(2 + 4 fp32 main grads + 4 + 8). Activations come on top of either.")

MODEL_STATE_PARTS = ("weights", "master_weights", "gradients", "main_grads", "optimizer_states",
                     "autocast_weight_copies", "fp8_weight_copies")

COMPONENT_FORMULA = {
    "activations": ("saved activations of the decoder layers", ACT_SRC),
    "autocast_weight_copies": ("half-precision copies torch.autocast makes of fp32 linear weights (2 B each)",
                               "PyTorch AMP autocast cast cache (autocast_mode.cpp cached_cast: trained leaf weights that are "
                               "not views, so not FSDP1's); HF docs '6 bytes per parameter' in mixed precision"),
    "fp8_weight_copies": ("TransformerEngine's float8 copies of the te.Linear weights, quantized from the parameter "
                          "(1 B rowwise + 1 B transposed per element on Hopper/Ada, 1 B on datacenter Blackwell, whose "
                          "non-TN FP8 GEMMs need no transpose, eq. T1), saved from each layer's "
                          "forward to its backward (a checkpointed layer: its recompute's only); under Megatron-Core, "
                          "which passes is_first_microbatch, every layer's kept in _fp8_workspaces the whole step; "
                          "under MXFP8 a rowwise and a columnwise copy on every GPU, each 1 B + one E8M0 scale per 32 "
                          "elements (eq. T1m)",
                          "formulas/float8_training.py te_weight_copy_bytes (" + TE_SOURCE + "; " + MXFP8_SOURCE + ")"),
    "head_activations": ("final norm, lm_head input, fp32 log-softmax of the loss", ACT_SRC),
    "logits_and_loss": ("logits + fp32 upcast (forward) or the two fp32 [tokens, vocab] loss gradients (backward)",
                        "transformers loss_utils.py ForCausalLMLoss (logits.float()); torch cross_entropy"),
    "kept_logits": ("the shifted fp32 logits the training loop keeps from its loss to the next forward",
                    "torchtune recipes/lora_finetune_single_device.py @ 0217d44c2 lines 460-469 (formulas/"
                    "training_activations.py head_activations, eq. K1)"),
    "rotary_and_masks": ("rotary cos/sin tables and attention masks shared by all layers", ACT_SRC),
    "backward_transient": ("gradients alive inside one layer's backward (with .grads kept across micro-batches, at "
                           "least the MLP down projection's new weight gradient beside its own, eq. A2; not under autocast)",
                           ACT_SRC + " layer_backward_transient, layer_fresh_gradient_bytes"),
    "ring_attention_forward": ("context parallelism: one layer's ring-attention forward buffers on the worst rank "
                               "(the K/V gathered from every cp rank, + the larger of step 0's and a whole-q "
                               "merge's), live while the last layer's attention runs",
                               "formulas/context_parallel.py ring_attention_forward_bytes (torch 2.13 "
                               "_context_parallel/_attention.py lines 186, 214, 273-302, 317-487)"),
    "tied_embedding_gradients": ("a trained tied embedding at the backward end: the lm_head's gradient waiting in "
                                 "the parameter's input buffer, the embedding's own and their sum, above the one "
                                 "gradient counted",
                                 "torch/csrc/autograd/input_buffer.cpp @ 4537ef6 accumulate lines 87-127 "
                                 "(formulas/training_activations.py tied_embedding_backward_end_bytes, eq. T1)"),
    "embedding_gradient_accumulation": ("an untied trained embedding's new [V, h] gradient at the backward end, "
                                        "beside its .grad kept across micro-batches until AccumulateGrad adds it in "
                                        "place",
                                        "torch/csrc/autograd/functions/accumulate_grad.h @ cf30153 (torch 2.13.0) "
                                        "lines 238-252 (formulas/training_activations.py "
                                        "accumulate_grad_transient_bytes, eq. A1)"),
    "gradient_buckets": ("data-parallel gradient buckets (DDP flat buckets / ZeRO reduce buffer / FSDP unit grads)",
                         PAR_SRC),
    "gathered_params": ("ZeRO-3/FSDP layer parameters gathered whole (current + prefetched layer)", PAR_SRC),
    "persistent_params": ("DeepSpeed ZeRO-3 persistent parameters (at most stage3_param_persistence_threshold = 1e5 "
                          "elements: norms, biases, small projections and LoRA matrices) kept whole on every rank "
                          "beside their partitions; their gradients and optimizer states are partitioned",
                          "formulas/deepspeed_zero.py persistent_param_bytes, eq. Z4 (deepspeed/runtime/zero/"
                          "partition_parameters.py @ 0.19.8 lines 1292-1297, 1828-1830; "
                          "partitioned_param_coordinator.py line 640; stage3.py lines 2839-2841)"),
    "quantization_transient": ("the largest base matrix being quantized to NF4 while the model is built (bf16 source "
                               "and the quantizer's temporaries)", "formulas/nf4_quantization.py"),
    "dequant_buffer": ("one 4-bit matrix dequantized for the matmul (forward and backward; bitsandbytes 0.42: in "
                       "fp16, then cast to the compute dtype)",
                       "bitsandbytes autograd/_functions.py MatMul4Bit (dequantize_4bit); formulas/nf4_quantization.py "
                       "eq. 5"),
    "pipeline_buffers": ("torch's pipeline stage (each of the rank's under an interleaved schedule): one gradient "
                         "receive buffer per micro-batch (not on the last stage), one activation receive buffer per "
                         "micro-batch (not on the first), the in-flight micro-batches' stage outputs; each a "
                         "micro-batch's residual stream",
                         "formulas/parallelism.py eq. (PP3) (torch 2.13 pipelining/stage.py lines 237-248, 322-331, "
                         "913, 966, 2243-2273, 2286-2316; schedules.py lines 453-474)"),
    "kept_graph_inputs": ("the quantized linears' inputs bitsandbytes 0.42's MatMul4Bit nodes hold while the loop "
                          "keeps the graph (the previous step's at forward end)",
                          "bitsandbytes autograd/_functions.py @ 0.42.0 line 523; litgpt finetune/lora.py @ 00af8b0d "
                          "lines 304-310 (formulas/training_activations.py graph_kept_matmul_inputs, eq. G1)"),
}
TENSOR_ITEMS_EXCLUDED = ("cuda_context", "allocator_reserve")


def _load(model: ModelSpec | str) -> ModelSpec:
    from ...models import spec_of
    return spec_of(model)


def estimate_training(model: ModelSpec | str, workload: TrainingWorkload | None = None, **kwargs: Any) -> Estimate:
    """Estimate the per-device peak memory of training ``model`` under ``workload`` (or TrainingWorkload fields).

    With a ``workload``, ``device=`` may be given beside it as a catalog ``Device`` (the one the workload's
    ``device_fields`` came from): checked as a named device is (``refuse_attention_kernel``), nothing else changes.

    Returns an :class:`~llmsizer.result.Estimate` of kind 'training': items (each with formula, source and
    range) of the most loaded device at its peak moment, host items when offloading, the assumptions applied
    (defaults flagged) and warnings; ``details`` holds the model-state totals, every phase's total and the
    per-layer activation terms.

    >>> est = estimate_training("qwen2.5-0.5b", method="lora", micro_batch=2, seq_len=1024)
    >>> est.item("weights").bytes > 0
    True
    """
    prepared = _prepared(model, workload, kwargs)
    if isinstance(prepared, Estimate):
        return prepared
    spec, w, notes = prepared
    return with_device_notes(_least_sharded(spec, w), notes)


def training_need(model: ModelSpec | str, **kwargs: Any) -> int:
    """The expected device need [bytes per device] of ``estimate_training(model, **kwargs)``
    (``est.total("device")[1]``, eq. 2's need) without composing its words: the same checks and the same ZeRO stage
    (``sharded_workload``), the items measured (``_need``) and not explained, warned about or judged. What a search
    that compares needs alone reads (fit.py ``training_fits_at``'s ladder)."""
    return training_needs(model, **kwargs)[0]


def training_needs(model: ModelSpec | str, **kwargs: Any) -> tuple[int, int]:
    """``training_need`` and the host need beside it [bytes per training process]: ``est.total("device")[1]`` and
    ``est.total("host")[1]`` of ``estimate_training(model, **kwargs)`` (what offload= keeps in pinned host RAM, the
    host runtime), from the same measured items."""
    prepared = _prepared(model, None, kwargs)
    if isinstance(prepared, Estimate):
        return prepared.total("device")[1], prepared.total("host")[1]
    spec, w, _ = prepared
    items = _measured_items(spec, sharded_workload(spec, w))[0]
    assert items is not None  # (no budget: always measured)
    return _device_need(items), sum(i.bytes for i in items if i.location == "host")


def _prepared(model: ModelSpec | str, workload: TrainingWorkload | None, kwargs: dict[str, Any]
              ) -> tuple[ModelSpec, TrainingWorkload, Notes] | Estimate:
    """``estimate_training``'s checks and workload: (the spec, the workload before its ZeRO stage is chosen, the
    device's notes), or the whole estimate where an instance of several devices answers (``_on_instance``)."""
    device = None
    if workload is not None and isinstance(kwargs.get("device"), Device) and len(kwargs) == 1:
        device = kwargs.pop("device")  # the workload's device, for the checks a named device gets (kernel floors)
    if workload is not None and set(kwargs) == {"device"}:
        raise InputError("device beside a workload takes a catalog Device (llmsizer.catalog.hardware); a device name "
                         "goes with keyword fields: estimate_training(model, device='h100-sxm', ...)")
    if workload is not None and kwargs:
        raise InputError("give either a workload or keyword fields, not both")
    spec = _load(model)
    notes = Notes()
    if workload is None and kwargs.get("device") is not None:
        kwargs = detect_named(kwargs)  # 'detected': this machine, detected once
        on_instance = _on_instance(spec, kwargs)
        if on_instance is not None:
            return on_instance
        # a catalog device or instance, as `train --device` takes it (estimate/device.py, the one resolver): its kind,
        # its memory when none is given, the assumptions naming both and the memory's warning
        resolved, device, _, notes = workload_on_device(kwargs, "estimate_training")
        refuse_training_apart(device, int(resolved.get("gpus") or 1), "gpus")  # several MIG devices (device.py)
        # the caller's fields in the caller's order, then what the resolver added (the same keywords and values): the
        # workload ``training_workload`` built for the same fields is the one this estimate reads (fit_training's
        # kernel check, ``training_on_device``)
        kwargs = {k: resolved[k] for k in kwargs if k in resolved}
        kwargs.update(resolved)
    w = workload if workload is not None else training_workload(kwargs)
    spec, w = with_framework(spec, w)  # the framework profile's defaults where the caller stated nothing
    refuse_unmodelled(spec, training=True, w=w)
    if device is not None:  # an attention kernel the device cannot run: refused as the duration refuses it
        refuse_attention_kernel(spec, w, device)
    if workload is None and device is not None and device.origin != "generic" and w.memory is None:
        from ..fit import refuse_unknown_memory  # (fit imports this module)
        refuse_unknown_memory(device, None)  # a named device's memory is the budget, as train --device and fit refuse
    _refuse_adapter_fields_on_full(w)
    stated = (kwargs.get("gpus_per_node") is not None if workload is None
              else workload.given is not None and "gpus_per_node" in workload.given)  # (review24 D4: a workload too)
    if stated:  # a machine size stated: whole machines, as
        # `train --gpus-per-node` and fit_training refuse it (specs/training.py check_whole_machines, the one rule;
        # probe19 D4: estimate_training(gpus=12, gpus_per_node=8) answered)
        check_whole_machines(w.gpus, w.gpus_per_node, "gpus")
    return spec, w, notes


def _on_instance(spec: ModelSpec, kwargs: dict[str, Any]) -> Estimate | None:
    """``device`` an instance of several devices, or a detected machine of several (``detect_named``): the answer of
    `train --device INSTANCE` / `train --device detected` (``fit_training`` on its devices, or ``gpus`` of them: the
    least-sharded ZeRO stage that fits its memory, and its verdict with the machine's RAM for the host part:
    ``training_estimate``); None for one device."""
    from ..fit import fit_training, training_estimate  # (fit imports this module)
    hw, detected, files = detected_machine(kwargs["device"], None, ())
    if isinstance(hw, Device):
        return None
    _, count, _, instance = resolve_target(hw, files)
    if detected is None and (instance is None or not count or count < 2):
        return None
    fields = {k: v for k, v in kwargs.items() if k not in ("device", "memory", "headroom")}
    machine = kwargs["device"] if instance is None else instance  # the detection, or the instance
    return training_estimate(fit_training(spec, machine, None, headroom=kwargs.get("headroom"),
                                          memory=kwargs.get("memory"), fits_at=False, **fields))


_WORKLOADS: dict[tuple[Any, ...], TrainingWorkload] = {}


def training_workload(fields: dict[str, Any]) -> TrainingWorkload:
    """``TrainingWorkload(**fields)``, memoized on the fields (their names, values and the values' types: all the
    constructor reads; a workload is immutable): a catalog-wide search (``recommend --train``, ``plan``) times one
    run on every device with the same fields, and the same object lets the duration's memos keyed on the workload
    (estimate/duration.py) match it by identity; ``fit_training``'s kernel check and its estimate (``_prepared``)
    build one workload. A field value that cannot be hashed: built each time."""
    vals = tuple(fields.values())
    key = (tuple(fields), vals, tuple(map(type, vals)))
    try:
        hit = _WORKLOADS.get(key)
    except TypeError:
        return TrainingWorkload(**fields)
    if hit is None:
        if len(_WORKLOADS) >= 1024:
            _WORKLOADS.clear()
        hit = _WORKLOADS[key] = TrainingWorkload(**fields)
    return hit


ZERO_WHY = ("least-sharded ZeRO stage that fits (0 -> 1 -> 2 -> 3, from 1 under offload optimizer: less communication "
            "first; a stage the framework refuses, as DeepSpeed's pipeline ZeRO-2/3, skipped; --zero to fix it)")
ZERO_NONE_FITS_WHY = ("no ZeRO stage fits (0 -> 1 -> 2 -> 3 tried, those the framework refuses skipped): the stage "
                      "that needs the least memory, the closest to fitting (--zero to fix it)")


def chooses_zero(w: TrainingWorkload) -> bool:
    """Whether the ZeRO stage of ``w`` is chosen rather than given: a memory budget, several devices (or one under
    ``offload``: DeepSpeed's ZeRO-Offload needs a stage, ZeRO-3 for 'params', specs/training.py ``offload_without_zero``), not
    an Apple GPU (no DeepSpeed ZeRO there: specs/training.py ``off_unified_memory``), and neither ``zero`` nor ``fsdp``
    given (``w.given``, specs/given.py), nor ``grad_sync`` (a DDP setting: it states
    ZeRO 0)."""
    return (w.memory is not None and (w.gpus > 1 or w.offload != "none") and w.grad_sync is None
            and w.gpu_runtime != "metal" and not {"zero", "fsdp"} & (w.given or frozenset()))


def sharded_workload(spec: ModelSpec | str, w: TrainingWorkload) -> TrainingWorkload:
    """``w`` with its ZeRO stage: the one rule (``estimate_training``, so ``train --memory/--device``, ``fit --train``,
    ``recommend --train``, ``plan`` and the Python API): when ``chooses_zero(w)``, the least-sharded stage whose
    estimate fits ``w.memory`` (0 -> 1 -> 2 -> 3: less communication first), else ``w``. When none fits, the stage
    whose expected need is the smallest (the least sharded of equals): ZeRO-3 is not always it, since its gathered
    layers add to a step that shards little (a QLoRA base: ZeRO-1 23,831,919,488 B, ZeRO-3 23,980,649,408 B)."""
    if not chooses_zero(w):
        return w
    spec = _load(spec)
    assert w.memory is not None  # (chooses_zero)
    headroom = check_headroom(w.headroom)
    # a stage is compared by its expected device need alone (eq. 2, ``fits_budget``): measured, its words (the
    # assumptions' explanation, warnings, details, verdict) composed only for the stage taken (``_finish``)
    tried = []
    # DeepSpeed's optimizer offload needs a ZeRO stage (specs/training.py ``offload_without_zero``): from ZeRO-1
    # and its parameter offload ZeRO-3 (``offload_without_zero``: offload_param is valid with stage 3 only)
    stages = (1, 2, 3) if w.offload == "optimizer" else (3,) if w.offload == "params" else (0, 1, 2, 3)
    refused: FieldError | None = None
    skipped: list[tuple[int, TrainingWorkload]] = []
    for stage in stages:
        staged = replace_checked(w, zero=stage)
        try:  # a stage the framework refuses (setup.py check_framework_layout: Megatron's ZeRO-3) is never offered
            check_framework_layout(spec, staged)
        except FieldError as e:  # every stage refused: the first stage's reason (the least sharded, the one the
            refused = refused or e  # search would take; the later stages add their own, such as Megatron's ZeRO-3)
            continue
        need, measured, key = _need(spec, staged, (w.memory, headroom))
        if need is None:  # its model states alone are past the budget: measured only if no stage fits
            skipped.append((stage, staged))
            continue
        if fits_budget(need, w.memory, headroom):
            _keep(spec, staged, measured, key)
            return staged
        tried.append((need, stage, staged, measured, key))
    for stage, staged in skipped:  # none fits: the least need of every stage, those skipped too
        need, measured, key = _need(spec, staged)
        assert need is not None  # (no budget: always measured)
        tried.append((need, stage, staged, measured, key))
    if not tried and refused is not None:
        raise refused
    _, _, staged, measured, key = min(tried, key=itemgetter(0, 1))
    _keep(spec, staged, measured, key)
    return staged


def _need(spec: ModelSpec, w: TrainingWorkload, budget: tuple[int, float] | None = None
          ) -> tuple[int | None, _Measured | None, tuple[Any, ...] | None]:
    """The expected device bytes of ``w``'s estimate (``est.total("device")[1]``), its measurement when it was
    measured now (None: read from an estimate or items already made for ``w``) and ``_MEMO``'s key of ``w`` (None:
    a field value cannot be hashed, no memo). ``budget`` (usable bytes, headroom): a need not yet measured whose
    model states alone do not fit it (``_states_past``) is not measured: (None, None, key)."""
    items, measured, key = _measured_items(spec, w, budget)
    return (None if items is None else _device_need(items)), measured, key


def _measured_items(spec: ModelSpec, w: TrainingWorkload, budget: tuple[int, float] | None = None
                    ) -> tuple[Sequence[Item] | None, _Measured | None, tuple[Any, ...] | None]:
    """``w``'s estimate's items (from ``_MEMO``, ``_ITEMS`` or measured now), as ``_need`` returns beside them;
    None in place of the items where ``budget`` is given and ``w``'s model states alone are past it."""
    key = _memo_key(spec, w)
    try:
        hit = _MEMO.get(key)
    except TypeError:
        measured = _measure(spec, w, None)
        return measured.acc.items, measured, None
    if hit is not None and hit[0] is spec:
        return hit[1].items, None, key
    items_key = _items_key(spec, w, key)
    made = _ITEMS.get(items_key)
    if made is not None and made[0] is spec:
        return made[1], None, key
    started = None
    if budget is not None and w.pp == 1 and w.method != "qlora":
        started = _states_past(spec, w, items_key, budget)
        if started is None:
            return None, None, key
    measured = _measure(spec, w, items_key, started)
    _remember_items(items_key, spec, tuple(measured.acc.items))
    return measured.acc.items, measured, key


def _states_past(spec: ModelSpec, w: TrainingWorkload, items_key: tuple[Any, ...],
                 budget: tuple[int, float]) -> tuple[Acc, TrainingContext, StageStates] | None:
    """None when the model states of ``w`` (one pipeline stage, not QLoRA) alone do not fit ``budget``: the weights,
    fp32 master weights and optimizer states on the device (``stage_states``) are parts of every moment of the
    step (training/timeline.py ``stage_timeline``'s ``base``; only QLoRA's model-init moment holds fewer), so
    items of their bytes are in the estimate at its peak, and no metric drops them (allocator.py ``apply_metric``
    drops the reserve and the CUDA context alone): the need is at least their sum (eq. 2 then refuses it, whatever
    the rest). Else the start of ``_measure`` (its assumptions so far, the context, stage 0's states), for it to go
    on from."""
    acc, ctx = _start(spec, w, items_key)
    st = stage_states(ctx, 0)
    if not fits_budget(st.weights + st.master + st.optimizer, *budget):
        return None
    return acc, ctx, st


def _keep(spec: ModelSpec, w: TrainingWorkload, measured: _Measured | None, key: tuple[Any, ...] | None) -> None:
    """The measurement of the stage a search took, kept for ``_memoized`` to finish (``_finish``) when the estimate
    is asked for: a caller that reads the need alone (``training_needs``, the not-fitting ladder's steps) never
    composes its words; one that asks for the estimate gets what finishing it at once gave."""
    if measured is not None and key is not None and measured.items_key is not None:
        if len(_MEASURED) >= 1024:
            _MEASURED.clear()
        _MEASURED[key] = (spec, w, measured)


def _device_need(items: Sequence[Item]) -> int:
    """The expected device total of ``items`` (``Estimate.total("device")[1]``: the device items' bytes)."""
    return sum(i.bytes for i in items if i.location == "device")


def _least_sharded(spec: ModelSpec, w: TrainingWorkload) -> Estimate:
    """The estimate of ``w`` at its ZeRO stage (``sharded_workload``); a chosen stage is the ``zero`` assumption."""
    staged = sharded_workload(spec, w)
    est = _memoized(spec, staged)
    if staged is w:
        return _fsdp_precision_hint(spec, w, est)
    why = ZERO_WHY if est.details["fits"] else ZERO_NONE_FITS_WHY
    assumptions = tuple(Assumption("zero", staged.zero, True, why) if a.name == "zero" else a
                        for a in est.assumptions)
    return est.but(assumptions)


FSDP_MIXED_PRECISION = "fsdp_mixed_precision"


def _fsdp_precision_hint(spec: ModelSpec, w: TrainingWorkload, est: Estimate) -> Estimate:
    """``est`` with a warning naming FSDP's own mixed precision when autocast's weight copies are part of why it
    does not fit: under ``bf16-mixed`` torch.autocast casts each fp32 weight to bf16 for its matmul and autograd
    keeps the copy until the backward (``autocast_weight_copies``, formulas/training_states.py's recipe table);
    under ``fsdp-bf16-mixed`` (FSDP2 MixedPrecisionPolicy(param_dtype=bf16), as torchtitan and torchtune train)
    each unit is all-gathered in bf16 and freed after, so no such copies are held. The number is this estimator's
    own answer for that precision, every other field as given; the default precision is unchanged."""
    if (w.precision != "bf16-mixed" or w.fsdp is None or w.memory is None or est.details.get("fits", True)
            or not any(i.name == "autocast_weight_copies" and i.bytes for i in est.items)):
        return est
    try:  # the alternative's need alone (its words are not shown): measured, or read from an estimate made
        need = _need(spec, replace_checked(w, precision="fsdp-bf16-mixed"))[0]
    except InputError:  # a setting fsdp-bf16-mixed does not take: no alternative to name
        return est
    assert need is not None  # (no budget: always measured)
    copies = est.item("autocast_weight_copies").bytes
    verdict = "which fits" if fits_budget(need, w.memory, check_headroom(w.headroom)) else "still over the budget"
    text = (f"{FSDP_MIXED_PRECISION}: precision bf16-mixed holds torch.autocast's bf16 copies of the fp32 weights "
            f"({format_bytes(copies)} at the peak); with --precision fsdp-bf16-mixed (FSDP's own MixedPrecisionPolicy, "
            f"as torchtitan and torchtune use: each unit all-gathered in bf16 and freed after) it needs "
            f"{format_bytes(need)} per device, {verdict}")
    return est.but(warnings=(*est.warnings, KindedWarning(text, FSDP_MIXED_PRECISION)))


def with_device_notes(est: Estimate, notes: Notes) -> Estimate:
    """``est`` with its device's notes first (estimate/device.py ``named_device_notes``): the assumptions naming the
    device and its memory, and the warnings. One path: every training answer on a named device carries them
    (``estimate_training(device=)``, ``fit_training``)."""
    if not notes.assumptions and not notes.warnings:
        return est
    return est.but((*notes.assumptions, *est.assumptions), (*notes.warnings, *est.warnings))


def _memoized(spec: ModelSpec, w: TrainingWorkload) -> Estimate:
    """The estimate of ``w``, memoized."""
    # memoized on exactly what the estimate reads: the spec (by identity; the memo keeps it alive) and every
    # workload field with its type. Each caller gets its own ``details`` (the one mutable part): the memo keeps a
    # marshal snapshot of them (dicts, lists and scalars, bit for bit), the first caller the estimate itself.
    key = _memo_key(spec, w)
    try:
        hit = _MEMO.get(key)
    except TypeError:  # an unhashable field value: no memo
        return _estimate(spec, w)
    if hit is not None and hit[0] is spec:
        return _copy(hit[1], hit[2])
    kept = _MEASURED.pop(key, None)  # a search's measurement of this workload (``_keep``): finished now, once
    if kept is not None and kept[0] is spec and kept[2].items_key is not None:
        est = _finish(spec, kept[1], kept[2])
        _remember(spec, key, kept[2].items_key, est)
        return est
    items_key = _items_key(spec, w, key)
    est = _estimate(spec, w, items_key)
    _remember(spec, key, items_key, est)
    return est


def _memo_key(spec: ModelSpec, w: TrainingWorkload) -> tuple[Any, ...]:
    """``_MEMO``'s key of ``w``: the spec's identity, every workload field and its type (unhashable when a field
    value is)."""
    vals = tuple(w.__dict__.values())
    return (id(spec), vals, tuple(map(type, vals)))


def _remember(spec: ModelSpec, key: tuple[Any, ...], items_key: tuple[Any, ...], est: Estimate) -> None:
    """``est`` into the estimates' memo (with a snapshot of its details) and its items into the items memo."""
    if len(_MEMO) >= 1024:
        _MEMO.clear()
    _MEMO[key] = (spec, est, _snapshot(est.details))
    _remember_items(items_key, spec, est.items)


def _remember_items(items_key: tuple[Any, ...], spec: ModelSpec, items: tuple[Item, ...]) -> None:
    if len(_ITEMS) >= 1024:
        _ITEMS.clear()
    _ITEMS[items_key] = (spec, items)


_MEMO: dict[tuple[Any, ...], tuple[ModelSpec, Estimate, bytes | None]] = {}
# the measurement of the ZeRO stage a search took (``_keep``), on ``_MEMO``'s key, until ``_memoized`` finishes it
_MEASURED: dict[tuple[Any, ...], tuple[ModelSpec, TrainingWorkload, _Measured]] = {}

# The items of an estimate do not read the memory budget, the headroom or which fields the caller named (those decide
# the verdict, the ZeRO stage chosen by ``sharded_workload`` and the assumptions' "(default)" flags): an estimate's
# items are also memoized on the other fields, for callers that need the items alone (estimate_items).
ITEMS_IGNORE = frozenset({"memory", "headroom", "given"})
_ITEMS: dict[tuple[Any, ...], tuple[ModelSpec, tuple[Item, ...]]] = {}


def _items_key(spec: ModelSpec, w: TrainingWorkload, key: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
    """The items memo's key of ``w``; ``key``: ``_memoized``'s key of this ``w`` (all its values and their types),
    from which the same entries are picked."""
    names = tuple(w.__dict__)
    pick = _ITEMS_FIELDS.get(names)
    if pick is None:  # which entries of a workload's fields the key keeps (one per field layout: a few at most)
        pick = _ITEMS_FIELDS[names] = itemgetter(*(n for n, k in enumerate(names) if k not in ITEMS_IGNORE))
    if key is not None:
        return (id(spec), pick(key[1]), pick(key[2]))
    vals = pick(tuple(w.__dict__.values()))
    return (id(spec), vals, tuple(map(type, vals)))


_ITEMS_FIELDS: dict[tuple[str, ...], Callable[[tuple[Any, ...]], Any]] = {}  # a workload has many fields: tuples


def estimate_items(spec: ModelSpec, w: TrainingWorkload) -> tuple[Item, ...]:
    """``estimate_training(spec, w).items``: those of an estimate already made for a workload that differs from ``w``
    only in memory, headroom or the fields named as given (fit's estimate on the device's memory, which passed the
    same checks), else a new estimate. A ``w`` whose ZeRO stage is chosen by its memory is always estimated."""
    spec, w = with_framework(spec, w)
    refuse_unmodelled(spec, training=True, w=w)
    _refuse_adapter_fields_on_full(w)
    if not chooses_zero(w):
        hit = _memo_hit(_ITEMS, spec, w)
        if hit is not None:
            return hit
    return estimate_training(spec, w).items


# The resolved context (dtypes, recipe, optimizer, adapters: estimate/training/setup.py ``resolve``) of the estimates
# made, on the same key as their items: ``resolve`` reads neither the memory, the headroom nor which fields were
# given (those only flag its assumptions as defaults).
_CONTEXTS: dict[tuple[Any, ...], tuple[ModelSpec, TrainingContext]] = {}


def training_context(spec: ModelSpec, w: TrainingWorkload) -> TrainingContext:
    """``resolve(spec, w)``'s context without its assumptions: the one an estimate already made for a workload that
    differs from ``w`` only in memory, headroom or the fields named as given resolved (its ``w`` is that estimate's
    workload), else resolved now (the duration's optimizer step reads it: the same dtypes as the memory)."""
    hit = _memo_hit(_CONTEXTS, spec, w)
    return hit if hit is not None else resolve(spec, w, Acc())


# The states of each stage a measurement made (``stage_states``: a function of the context and the stage alone, read
# and never changed after), by its memoized context (``_CONTEXTS``, whose object the key's id names while the value
# holds it): the duration's FSDP collective volume reads those of the context ``training_context`` hands it.
_STAGE_STATES: dict[tuple[int, int], tuple[TrainingContext, StageStates]] = {}


def context_stage_states(ctx: TrainingContext, stage: int) -> StageStates:
    """``stage_states(ctx, stage)``: those an estimate made on this very context, else made now."""
    hit = _STAGE_STATES.get((id(ctx), stage))
    return hit[1] if hit is not None and hit[0] is ctx else stage_states(ctx, stage)


def _memo_hit(memo: dict[tuple[Any, ...], tuple[ModelSpec, Any]], spec: ModelSpec, w: TrainingWorkload) -> Any:
    """The value ``memo`` holds for ``w`` on the items key when it was made for this very ``spec``, else None (an
    unhashable field value: no memo)."""
    try:
        hit = memo.get(_items_key(spec, w))
    except TypeError:
        return None
    return hit[1] if hit is not None and hit[0] is spec else None


ADAPTER_FIELDS = ("rank", "alpha", "targets", "adapter_dtype")  # modules_to_save and base_dtype: refused by the spec


def _refuse_adapter_fields_on_full(w: TrainingWorkload) -> None:
    """Adapter settings the caller gave (``given``, specs/given.py) with method 'full' would be silently unused:
    refused, as base_dtype is by the spec."""
    extra = [f for f in ADAPTER_FIELDS if f in (w.given or ())]
    if w.method == "full" and extra:
        raise InputError(f"{', '.join(extra)} appl{'ies' if len(extra) == 1 else 'y'} to lora/dora/qlora adapters; "
                         "method is 'full' (give --method lora, or drop them)")


def _copy_value(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _copy_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_copy_value(x) for x in v]
    return v


def _snapshot(details: dict[str, Any]) -> bytes | None:
    """``details`` as marshal bytes (format 2: no shared references, so each list and dict comes back a copy of its
    own), or None when it holds a type marshal does not write."""
    try:
        return marshal.dumps(details, 2)
    except ValueError:
        return None


def _copy(est: Estimate, snapshot: bytes | None = None) -> Estimate:
    """``est`` with details of its own: from ``snapshot`` (``_snapshot`` of them) when there is one."""
    details = marshal.loads(snapshot) if snapshot is not None else _copy_value(est.details)
    return est.but(details=details)


class _Measured(NamedTuple):
    """An estimate's measurement (``_measure``): its context, the accumulator holding every item (and the
    assumptions and warnings so far), the most loaded stage and its timeline, every stage evaluated, the items memo's
    key (None: no memo)."""

    ctx: TrainingContext
    acc: Acc
    st: StageStates
    tl: StageTimeline
    results: list[tuple[StageStates, StageTimeline]]
    items_key: tuple[Any, ...] | None


def _estimate(spec: ModelSpec, w: TrainingWorkload, items_key: tuple[Any, ...] | None = None) -> Estimate:
    return _finish(spec, w, _measure(spec, w, items_key))


def _start(spec: ModelSpec, w: TrainingWorkload, items_key: tuple[Any, ...] | None) -> tuple[Acc, TrainingContext]:
    """The start of a measurement: the model's notes and the resolved context (kept on ``items_key``)."""
    acc = Acc()
    acc.assumptions.extend(model_note_assumptions(spec))  # config values the model reader defaulted or derived
    acc.assumptions.extend(mtp_assumptions(spec, training=True))  # stored MTP layers: not loaded (formulas/mtp.py)
    acc.warnings.extend(model_warnings(spec, training=True))
    ctx = resolve(spec, w, acc)
    if items_key is not None:  # (the memo's key: hashable)
        if len(_CONTEXTS) >= 1024:
            _CONTEXTS.clear()
        _CONTEXTS[items_key] = (spec, ctx)
    return acc, ctx


def _measure(spec: ModelSpec, w: TrainingWorkload, items_key: tuple[Any, ...] | None,
             started: tuple[Acc, TrainingContext, StageStates] | None = None) -> _Measured:
    """The first part of an estimate: the stages' states and timelines and the items of the most loaded stage
    (every item: what follows adds only words and the verdict). ``started``: ``_start``'s answer and stage 0's
    states, made already (``_states_past``)."""
    if started is None:
        acc, ctx = _start(spec, w, items_key)
        st0 = None
    else:
        acc, ctx, st0 = started
    record_workload(w, acc, ("gpus", "zero", "tp", "pp", "ep", "offload"))
    if w.tp > 1:  # a framework profile's default too (torchtitan's TP plan: estimate/framework.py)
        record_workload(w, acc, ("sequence_parallel",))
    if w.pp > 1:
        record_workload(w, acc, ("pipeline_split",))
    results = []
    for s in stages_to_evaluate(spec, w):
        st = st0 if s == 0 and st0 is not None else stage_states(ctx, s)
        if items_key is not None:  # (the context is memoized: its stages' states are kept with it)
            if len(_STAGE_STATES) >= 1024:
                _STAGE_STATES.clear()
            _STAGE_STATES[id(ctx), s] = (ctx, st)
        results.append((st, stage_timeline(ctx, st)))
    if w.metric is not None and w.device != "gpu":
        raise InputError(f"metric {w.metric!r} compares with a CUDA GPU's allocator or nvidia-smi; a training step on "
                         f"device {w.device!r} is sized in host RAM (drop --metric)")
    if len(results) > 1 and w.metric in ("reserved", "nvidia-smi"):
        # the most loaded stage in the figure the user compares with: the allocator's reserve differs by stage (the
        # loss stage's eager-loss hole, eq. L1/L1p; the dynamic share the calibrated ratio scales), so the stage of
        # the highest allocated peak need not be the one of the highest reserved total
        st, tl = max(results, key=lambda r: _stage_device_total(ctx, r[0], r[1]))
    else:
        st, tl = max(results, key=lambda r: r[1].peak.total)
    acc.assumptions.append(_metric_items(ctx, st, tl, acc))
    return _Measured(ctx, acc, st, tl, results, items_key)


def _finish(spec: ModelSpec, w: TrainingWorkload, measured: _Measured) -> Estimate:
    """The estimate from its measurement: the explanation, the warnings, the details and the verdict."""
    ctx, acc, st, tl, results, _ = measured
    _explain(ctx, acc, tl)
    _warnings(ctx, st, tl, acc)
    details = _details(ctx, st, tl, results)
    details["peak_phase"] = tl.peak.name + (f" (pipeline stage {st.stage})" if w.pp > 1 else "")
    est = Estimate("training", spec.name, tuple(acc.items), tuple(acc.assumptions), tuple(acc.warnings), details)
    lo, mid, hi = est.total("device")
    # the training memory band comes from GPU runs (validation rows); a CPU step has none
    calibrated = calibrated_need(est.items, TRAINING_MEMORY, PYTORCH_TRAINING) if w.device == "gpu" else None
    if calibrated is not None:
        details["calibrated_range"] = calibrated
    if w.memory is not None:  # the one fit rule (estimate/verdict.py)
        acc.assumptions.append(headroom_assumption(w.headroom))
        v = memory_verdict(mid, hi, w.memory, check_headroom(w.headroom), calibrated)
        details.update(v.details())
        acc.warnings.extend(v.warnings)
        decimal = decimal_memory_note(w.memory)  # memory given in GB, not GiB
        if decimal is not None:
            acc.warnings.append(decimal)
        est = est.but(tuple(acc.assumptions), tuple(acc.warnings))  # the same items (the verdict adds none)
    return est


def stages_to_evaluate(spec: ModelSpec, w: TrainingWorkload) -> tuple[int, ...]:
    """The pipeline stages whose peaks can be the highest: the first (the embedding, the most micro-batches in
    flight), the last (the head and the loss), and of the middle stages the first of each distinct sequence of layer
    kinds: a later middle stage with the same layers holds the same states and the same boundary buffers (eq. PP3:
    2 m boundary tensors on every middle stage, 2 m v on every middle rank of an interleaved schedule), with no more micro-batches in flight (min(p - i, m), non-increasing
    in i; under Interleaved1F1B each local stage's count, formulas/parallelism.py interleaved_peak_inflight, is too),
    so its every phase is at most the earlier one's. Under an uneven split (torchtitan's: 15 layers on stage 0,
    16 on stages 1-6 of Llama 3.1 405B over PP 8) a middle stage can hold the most."""
    if w.pp <= 1:
        return (0,)
    return _stages_to_evaluate(spec, w.pp, w.pipeline_split, w.virtual_stages)


@lru_cache(maxsize=256)
def _stages_to_evaluate(spec: ModelSpec, pp: int, split: str, virtual: int) -> tuple[int, ...]:
    return tuple(s for s, r in enumerate(stage_representatives(spec, pp, split, virtual)) if r == s)


@lru_cache(maxsize=256)
def stage_representatives(spec: ModelSpec, pp: int, split: str, virtual: int) -> tuple[int, ...]:
    """Each of the ``pp`` pipeline stages' representative by the rule of :func:`stages_to_evaluate`: the first and
    the last stage stand for themselves, a middle stage for the first middle stage with the same sequence of layer
    kinds (``layer_keys``), whose states (``stage_states``) it holds; ``(0,)`` without pipeline parallelism."""
    if pp <= 1:
        return (0,)
    keys = layer_keys(spec)
    first: dict[tuple[Any, ...], int] = {}
    out = [0]
    for k, r in enumerate(pipeline_stage_layers(spec.num_layers, pp, split, virtual)[1:-1], start=1):
        out.append(first.setdefault(tuple(keys[i] for i in r), k))
    return (*out, pp - 1)


def _measured_step(w: TrainingWorkload) -> str | None:
    """The key of estimate/allocator.py ``FIXED_STEP_RESERVE`` (eq. R2) for a step like the measured ones: one GPU,
    no FSDP or offloading, eager (not compiled), every layer or none recomputed, on PyTorch's CUDA caching allocator
    (CUDA, or ROCm's HIP build of it; review23a D5: not Gaudi's or Metal's); None for any other step."""
    if (w.gpus != 1 or w.gpu_runtime not in ("cuda", "rocm") or w.fsdp is not None or w.offload != "none" or w.compile or w.checkpoint_offload
            or w.checkpoint_every != 1):
        return None
    return w.grad_checkpointing


def _metric_items(ctx: TrainingContext, st: StageStates, tl: StageTimeline, acc: Acc) -> Assumption:
    """The items of stage ``st`` into ``acc``, rewritten to the workload's metric (estimate/allocator.py
    ``apply_metric``); returns the metric assumption."""
    w = ctx.w
    _items(ctx, st, tl, acc)
    init = next((p.total for p in tl.phases if p.name == "model init"), 0)  # reserved before the step
    fixed = None
    if w.batch_shapes == "fixed" and w.metric in POOL_METRICS:  # eq. (R1), estimate/allocator.py
        fixed = training_side_streams(w.fsdp is not None and w.fsdp_version == 2 and w.offload == "none", w.pp,
                                      w.grad_accumulation, st.layer_grads, st.grads,
                                      model_state_ways(w, w.shard_group)[1],
                                      [(p.total, p.parts.get("gradients", 0)) for p in tl.phases],
                                      fsdp2_copy_in_events(ctx, st), eager_loss_events_of(ctx, st),
                                      next((k for k, p in enumerate(tl.phases) if p.name == "loss backward"), None),
                                      loss_parallel=w.loss == "ce-loss-parallel", step=_measured_step(w))
    return apply_metric(acc.items, w.metric, TRAINING, floor=init, fixed=fixed,
                        device="cpu" if w.device == "cpu" else w.gpu_runtime)


def _stage_device_total(ctx: TrainingContext, st: StageStates, tl: StageTimeline) -> int:
    """Expected device bytes of stage ``st`` in the workload's metric (a scratch composition of its items)."""
    scratch = Acc()
    _metric_items(ctx, st, tl, scratch)
    return sum(i.bytes for i in scratch.items if i.location == "device")


def _items(ctx: TrainingContext, st: StageStates, tl: StageTimeline, acc: Acc) -> None:
    spec, w, rec = ctx.spec, ctx.w, ctx.recipe
    parts = tl.peak.parts
    pc = count_params(spec)
    layout = _layout_text(w, spec)
    fmt = ctx.base_format
    size = {"nf4-dq": "NF4 double-quantized", "nf4": "NF4, fp32 block scales",
            "fp8-block": f"e4m3 1 B + an fp32 scale per 128x128 block; the rest {ctx.base_bytes} B"}.get(
        fmt, f"{ctx.base_bytes} B")
    f8p = (f"; the te linears' {format_count(st.fp8_param_elements)} on this rank as float8 parameters "
           f"(fp8_param_gather, eq. T3: {fp8_param_bytes(1, w.gpu_capability)} B each)" if st.fp8_param_elements else "")
    acc.items.append(Item("weights", parts.get("weights", 0), "device",
                          formula=f"{format_count(pc.total)} params in {fmt} ({size}){layout}{f8p}",
                          source="formulas/weight_formats.py; " + RECIPE_SRC
                          + ("; formulas/float8_training.py fp8_param_bytes (" + FP8_PARAM_SOURCE + ")" if f8p else "")))
    if "adapter_weights" in parts and ctx.lora is not None:
        acc.items.append(Item("adapter_weights", parts["adapter_weights"], "device",
                              formula=f"{format_count(ctx.lora.total)} LoRA params (rank {ctx.lora.rank}"
                                      f"{', DoRA' if ctx.lora.dora else ''})"
                                      + (f", {format_count(st.trained_elements)} on this rank (the routed experts' "
                                         f"adapters with their experts / EP {w.ep})"
                                         if w.ep > 1 and ctx.lora.experts_total else "")
                                      + f" x {ctx.adapter_bytes} B"
                                      + (f" + trained copies of {', '.join(w.modules_to_save)} (modules_to_save) in "
                                         "the base dtype" if w.modules_to_save else ""),
                              source="formulas/lora.py (Hu et al. 2021 eq. 3; PEFT lora.Linear; "
                                     "peft/utils/other.py ModulesToSaveWrapper)"))
    if "master_weights" in parts:
        acc.items.append(Item("master_weights", parts["master_weights"], "device",
                              formula=f"{format_count(st.trained_elements)} trained x 4 B fp32 master{layout}",
                              source=RECIPE_SRC))
    grad_b = ctx.adapter_bytes if w.adapters else rec.grad_bytes
    g = parts.get("gradients", 0)
    g_note = "" if g else (f" - none at this moment (zero_grad(set_to_none=True) frees them before the forward); "
                           f"full size {format_bytes(st.grads + st.main_grads)}")
    if w.offload != "none":
        g_note = " - offloaded to host with the optimizer (see host_gradients)"
    if w.fsdp is not None and w.fsdp_version == 1 and w.adapters and w.fsdp1_lora_wrap == "with-layers":
        g_note += (" - FSDP1: each unit's flat gradient spans every element of the unit, frozen base included "
                   "(formulas/fsdp_flat_param.py; torch _flat_param.py lines 804-836)")
    if st.no_sync_grads:
        g_note += (" - FSDP1 no_sync: every unit's unsharded flat gradient, accumulated over the micro-batches until "
                   "the sync micro-batch's reduce-scatter (formulas/fsdp_flat_param.py eq. N1)")
    if pipeline_fsdp2(w):  # the timeline's rule (eq. PP2), not grad_op's sharded gradients
        g_note += (" - FSDP2 under pipeline parallelism: unsharded, accumulated over the micro-batches until the "
                   "step's one reduce-scatter (formulas/parallelism.py eq. PP2)")
    megatron = w.megatron_grad_buffer
    if megatron and w.offload == "none":  # the timeline's rule (timeline.py stage_timeline, ``megatron``)
        g_note += (" - Megatron-Core's grad buffer: allocated when the model is wrapped, every main_grad a view into "
                   "it, held at every moment and reduced in place (no bucket copy; Megatron-LM @d98e8a64 "
                   "megatron/core/distributed/param_and_grad_buffer.py:1190-1195, 1367-1369, 708-733)")
    # Megatron fp16's fp32 main grads exist at the optimizer step only (timeline.py ``step_main``)
    main_live = bool(rec.main_grad_bytes) and (not megatron or tl.peak.name == "optimizer step")
    if megatron and rec.main_grad_bytes and not main_live:
        g_note += " (its fp32 main-grad copies exist at the optimizer step only)"
    head_g = tl.peak.head_weight_grad
    kept = _grads_text(st, w, grad_b, main_live) if not head_g or g > head_g else ""
    if head_g:  # the lm_head backward moment (timeline.py, eq. H1): its weight gradient on top of the kept .grads
        g_note = (" + " if kept else "") + (
            f"{format_bytes(head_g)} the lm_head backward's weight gradient in the compute dtype"
            + (" and its fp32 cast" if ctx.weight_copy_bytes and w.loss_chunks <= 1 else "")
            + " (formulas/training_activations.py lm_head_backward_bytes, eq. H1)") + g_note
    acc.items.append(Item("gradients", g, "device",
                          formula=kept + g_note,
                          source=RECIPE_SRC))
    opt = ctx.optimizer
    where = ""
    if w.offload != "none":
        where = " - offloaded to host"
    elif opt.paged:
        where = (" - paged: the large tensors' moments in unified memory (see the host item); on the device the "
                 "8-bit block absmax, quantization maps and tensors under 1e5 elements")
    acc.items.append(Item("optimizer_states", parts.get("optimizer_states", 0), "device",
                          formula=f"{opt.name}: {state_bytes_per_param(opt.name, ctx.state_bytes):g} B per trained "
                                  f"param ({opt.description})"
                                  + (f"; the {format_count(st.save_elements)} modules_to_save params' states at "
                                     f"{state_bytes_per_param(opt.name, st.save_bytes):g} B (the copies' dtype, torch "
                                     "optimizers' zeros_like)" if st.save_elements else "") + where,
                          source="formulas/training_states.py optimizer table; " + opt.source))
    for name in ("activations", "autocast_weight_copies", "fp8_weight_copies", "head_activations", "logits_and_loss", "kept_logits",
                 "kept_graph_inputs", "rotary_and_masks", "backward_transient", "ring_attention_forward",
                 "tied_embedding_gradients",
                 "embedding_gradient_accumulation", "gradient_buckets", "gathered_params", "persistent_params",
                 "pipeline_buffers",
                 "dequant_buffer",
                 "quantization_transient"):
        if name not in parts:
            continue
        what, src = COMPONENT_FORMULA[name]
        formula, high = what, None
        if name == "logits_and_loss" and w.loss == "ce-loss-parallel":
            formula = ("vocabulary-sharded logits + fp32 upcast + the decomposed log-softmax's shifted logits "
                       "(forward) or three fp32 [tokens, vocab / tp] tensors of the fused NLL + log-softmax backward "
                       "(torch loss_parallel, eqs. LP1/LP2)")
            src = ("torch/distributed/tensor/parallel/loss.py @ v2.13.0 _log_softmax lines 197-221, "
                   "_nll_loss_and_log_softmax_backward lines 451-518; torchtitan train.py @ 9dec370 lines 131-134")
        if name == "gradient_buckets" and w.shard_stage == 0:
            n = math.ceil(st.grads / DDP_BUCKET_CAP_BYTES)
            formula = (f"DDP: {n} flat all-reduce buckets of bucket_cap_mb=25 hold a second copy of the gradients "
                       "(gradient_as_bucket_view=False, the default)")
        if name == "gradient_buckets" and w.zero == 3 and w.fsdp is None:
            formula = ("DeepSpeed ZeRO-3 IPG bucket: reduce_bucket_size 5e8 elements of the gradient dtype, allocated "
                       "at initialisation (+ at the step: the fp32 copy of a sub-group's gradient partition)")
            src = "formulas/deepspeed_zero.py (deepspeed/runtime/zero/stage3.py lines 731-735, 2398-2408; config.py)"
        if name == "gathered_params" and w.zero == 3 and w.fsdp is None:
            formula = ("DeepSpeed ZeRO-3: the prefetch keeps up to stage3_max_live_parameters (1e9 elements) gathered "
                       "once the trace is complete, overshooting by the lm_head when the queue reaches it; modules "
                       "reused within stage3_max_reuse_distance (1e9) stay gathered from forward to backward"
                       + ("; an offloaded parameter's partition is copied to the device beside its gathered buffer"
                          if w.offload == "params" else ""))
            src = ("formulas/deepspeed_zero.py (partitioned_param_coordinator.py fetch_sub_module lines 446-476, "
                   "__params_to_release lines 634-665; partition_parameters.py _all_gather_sequential 1388-1402)")
        if name == "autocast_weight_copies" and w.float8 and w.float8_recipe in TE_RECIPES:
            formula += ("; none of the te.Linears' (TransformerEngine quantizes their weights to float8 from the "
                        "parameter, fp8_weight_copies): the linears left nn.Linear only (lm_head)")
            src += "; " + TE_SOURCE
        if name == "autocast_weight_copies" and w.float8 and w.float8_recipe in TORCHAO_RECIPES:
            formula += ("; none of the Float8Linears' (torchao casts their weights to float8 itself, from a view the "
                        "autocast cache never takes): the linears left nn.Linear only (lm_head, MoE router and shared "
                        "expert)")
            src += "; formulas/float8_training.py float8_autocast_copied (torchao float8_linear.py lines 255-273)"
        if name == "backward_transient" and w.float8:
            formula = (f"max({formula}, the largest Float8Linear backward: its bf16 grad_output + float8 casts "
                       + ("(grad_output once, weight; 1 B each: the grad_weight GEMM in bf16"
                          if w.float8_recipe == "torchao-rowwise-gw-hp" else "(grad_output twice, weight, input; 1 B each")
                       + ("" if w.compile else
                                                                     ", + 2 fp32 temporaries of the cast in flight")
                       + ") + grad_input + 2 residual gradients)")
            src += "; formulas/float8_training.py (torchao float8_linear.py lines 94-204)"
        if name == "backward_transient" and w.context_parallel > 1 and w.cp_ring == "te-p2p":
            formula += (f" + TransformerEngine's P2P ring over {w.context_parallel} ranks: two [2, K/V] send / "
                        "receive buffers (K/V and dK/dV) and the dq buffer (eq. CP5)")
            src += "; formulas/context_parallel.py p2p_ring_backward_bytes (" + TE_CP_SOURCE + ")"
        elif name == "backward_transient" and w.cp_ring == "ulysses":
            formula += (f" + DeepSpeed-Ulysses over {w.context_parallel} ranks: the all-to-alls of the q, k, v gradients "
                        "(the replicated K/V gradients' excess, one gradient's send and receive buffers in flight; eq. U2)")
            src += "; formulas/context_parallel.py ulysses_backward_bytes (" + ULYSSES_SOURCE + ")"
        elif name == "backward_transient" and w.context_parallel > 1:
            formula += (f" + ring attention over {w.context_parallel} ranks: K/V gathered from all ranks, fp32 dq/dk/dv "
                        "accumulators and the rotating dK/dV buffer")
            src += "; formulas/context_parallel.py (torch _context_parallel/_attention.py)"
        if name == "ring_attention_forward" and w.cp_ring == "ulysses":
            formula = ("context parallelism (DeepSpeed-Ulysses): one layer's all-to-all buffers, q, k, v exchanged "
                       "to the whole sequence for heads / cp heads beside the local ones, one tensor's send and "
                       "receive buffers in flight (eq. U1), live while the last layer's attention runs")
            src = "formulas/context_parallel.py ulysses_forward_bytes (" + ULYSSES_SOURCE + ")"
        if name == "ring_attention_forward" and w.cp_ring == "te-p2p":
            formula = ("context parallelism: one layer's P2P ring-attention forward receive buffers (the local K/V "
                       f"and the {w.context_parallel - 1} received, held to the forward's end; eq. CP4), live while "
                       "the last layer's attention runs")
            src = "formulas/context_parallel.py p2p_ring_forward_bytes (" + TE_CP_SOURCE + ")"
        if name == "gathered_params" and pipeline_fsdp2(w):  # eq. PP1 where the timeline sized it so
            formula = ("FSDP2 under pipeline parallelism: every unit of the stage stays gathered through the step "
                       "(torchtitan reshard_after_forward=False with PP; the stage's backward does not reshard "
                       "either), whole, beside this rank's own shard")
            src = "formulas/parallelism.py eq. (PP1) (torch pipelining/stage.py lines 844-847; torchtitan 9dec370)"
        if name == "gathered_params" and w.fsdp2_units != "largest-two" and w.pp == 1:
            formula = (f"FSDP2 units as {w.fsdp2_units} lays them out: the root unit (embedding, final norm, output) "
                       + ("kept unsharded from its forward to its backward" if w.fsdp2_units != "torchtitan-resharded"
                          else "resharded after its forward and gathered again for the output's backward")
                       + (" + one block (every block resharded after its forward, the last too)"
                          if w.fsdp2_units == "torchtune" else " + one block (the last one kept after the forward)")
                       + ", each whole in the all-gather dtype beside this rank's shard (eqs. U1-U4)")
            src = ("formulas/fsdp2_units.py (torch 2.13 _fsdp_collectives.py lines 336-356, 447-470; _fsdp_state.py "
                   "lines 203-207; torchtitan parallelize_llama.py @ 9dec370 lines 322-339)")
        if name == "gathered_params" and traced_units_layout(w) is not None and w.fsdp_version == 1 and w.adapters:
            formula = ("FSDP1 LoRA wrapped adapters apart: the root unit (embedding, final norm, output) kept "
                       "unsharded through the step, every block resharded after its forward and gathered again at its "
                       "backward, one block at a time, each a whole flat parameter beside this rank's shard (eq. W2)")
            src = ("formulas/fsdp_flat_param.py eq. W2 (torch 2.13 _runtime_utils.py lines 494-499, 1473-1517; "
                   "torchtune utils/_distributed.py @ 0217d44c2 lines 212-242)")
        elif name == "gathered_params" and traced_units_layout(w) is not None and w.fsdp_version == 1:
            formula = ("FSDP1 full fine-tuning, each decoder layer a unit: the root unit (embedding, final norm, "
                       "output) kept unsharded through the step, every block resharded after its forward; in the "
                       "backward each block with the block below it prefetched (BACKWARD_PRE), each a whole flat "
                       "parameter beside this rank's shard (eq. W3)")
            src = ("formulas/fsdp_flat_param.py eq. W3 (torch 2.13 _runtime_utils.py lines 494-499, 673-693; "
                   "_exec_order_utils.py lines 88-107; torchtune recipes/full_finetune_distributed.py @ 0217d44c2 "
                   "lines 293-303)")
        if name in ("head_activations", "logits_and_loss") and w.loss == "fused-xentropy":
            formula = ("final norm, lm_head input, the half-precision logits and fp32 log-sum-exp the fused loss keeps"
                       if name == "head_activations" else
                       "the fused loss's fp32 per-token losses (forward) or the logits' gradient in their dtype "
                       "(backward): no fp32 [tokens, vocab] tensor (eq. X1)")
            src = ("flash-attn v1.0.9 flash_attn/losses/cross_entropy.py lines 36, 89, 100-102, 109; "
                   "csrc/xentropy/xentropy_kernel.cu lines 638-639, 697 (formulas/training_activations.py eq. X1)")
        if name in ("head_activations", "logits_and_loss") and w.loss == "megatron-ce":
            formula = ("final norm, lm_head input, the fp32 softmax Megatron's vocab-parallel cross-entropy keeps in "
                       "place of its one fp32 copy of the logits" if name == "head_activations" else
                       "the half-precision logits beside their fp32 copy (forward) or the logits' gradient in their "
                       "dtype (backward), on the rank's vocabulary shard (eq. MC1)")
            src = ("NVIDIA/Megatron-LM @d98e8a64 megatron/core/tensor_parallel/cross_entropy.py lines 25, 42, 61-62, "
                   "77, 181 (formulas/training_activations.py eq. MC1)")
        if name == "gathered_params" and float8_all_gather(w):
            formula += ("; the blocks' Float8Linear weights all-gathered in float8 (1 B per element, torchao "
                        "enable_fsdp_float8_all_gather), their norms, the embedding and the output in param_dtype")
            src += "; formulas/float8_training.py (torchao float8/fsdp_utils.py lines 228-251)"
        if name == "gathered_params" and w.fsdp is not None and w.adapters and (
                w.fsdp_version == 2 or w.fsdp1_lora_wrap == "with-layers"):
            formula += "; each unit's adapters all-gathered with it"
            src += "; estimate/training/gather_units.py (torchtune training/_distributed.py @30b8519 lines 618-623)"
        if name == "gathered_params" and w.fsdp_version == 1 and w.fsdp is not None:
            formula += "; FSDP1 flat parameters (+ the _mp_shard low-precision copy of a shard under mixed precision)"
            src += "; formulas/fsdp_flat_param.py"
        if name == "head_activations" and spec.encoder_decoder is not None:
            formula = ("outside the blocks: both stacks' final norms and dropout masks, the fp32 log-softmax, labels"
                       + (" (frozen embeddings and norms: eq. E6)" if w.adapters else
                          ", embedding ids and position-bias buckets (eq. E5)"))
            src = "formulas/encoder_decoder_activations.py"
        if name == "activations":
            formula = _activation_formula(ctx, tl)
            if spec.is_moe:
                routed = sum(n * sum(t.bytes for t in terms if "experts" in t.name)
                             for terms, n in tl.terms_alike())
                # uneven routing: an expert may take up to the capacity factor x its even share of tokens
                high = parts[name] + int(routed * tl.inflight * (MOE_CAPACITY_FACTOR - 1))
        acc.items.append(Item(name, parts[name], "device", None, high, formula, src))
    if "optimizer_step_temporaries" in parts:
        acc.items.append(Item("optimizer_step_temporaries", parts["optimizer_step_temporaries"], "device", 0,
                              max(parts["optimizer_step_temporaries"], tl.step_temporaries_foreach),
                              formula=f"{ctx.optimizer.name} {ctx.optimizer_impl}: the step's transient tensors "
                                      f"(foreach: {format_bytes(tl.step_temporaries_foreach)})",
                              source="formulas/training_states.py step_temporary_bytes (torch/optim/adam.py, "
                                     "_adafactor.py)"))
    if w.device == "gpu":
        device_context(acc.items, acc.assumptions, w.gpu_runtime, phase=TRAINING)
        # on a device with a CUDA context (or its stand-in) every metric rewrites this item (estimate/allocator.py
        # ``apply_metric``: the default's eq. 2h, the calibrated training ratio's high end); it stays as is only on
        # Metal, whose allocator no run measured
        acc.items.append(Item("allocator_reserve", 0, "device", 0, parts.get("activations", 0),
                              formula="reserved - allocated: 0 expected, up to one more activation peak cached (no "
                                      "measured run of this device's allocator: the calibrated training reserve, "
                                      "estimate/allocator.py RESERVE, is fitted on NVIDIA GPU runs)",
                              source="PyTorch docs 'CUDA semantics: memory management' (caching allocator keeps "
                                     "freed blocks)"))
    # on a CPU the step's tensors and the process's own runtime share one memory, the RAM being checked
    acc.span("host_runtime", E.TORCH_HOST_RUNTIME, "host" if w.device == "gpu" else "device")
    if st.paged_optimizer:
        acc.items.append(Item("paged_optimizer_states", st.paged_optimizer, "host", 0, st.paged_optimizer,
                              formula="bitsandbytes paged states live in CUDA unified memory: on the GPU while it has "
                                      "room, evicted to host RAM under pressure; torch's allocator does not count them",
                              source="bitsandbytes functional.get_paged (cudaMallocManaged); QLoRA section 3"))
    if w.checkpoint_offload:
        n = sum(1 for i in tl.layer_terms if (i + 1) % w.checkpoint_every == 0)
        each = checkpoint_input_bytes(spec, ctx.act)
        acc.items.append(Item("host_checkpointed_inputs", n * each * tl.inflight, "host",
                              formula=f"{n} checkpointed layers x {format_bytes(each)} input"
                                      + (f" x {tl.inflight} micro-batches" if tl.inflight > 1 else "")
                                      + " in host RAM (copied out in the forward, back for each layer's recompute)",
                              source="Unsloth offloaded checkpointing: unsloth_zoo/gradient_checkpointing.py @ 36ff5fc "
                                     "lines 136-160 (hidden_states.to('cpu') in forward, back to the GPU in backward); "
                                     "unsloth/models/llama.py @ e3162dc line 817"))
    if tl.offloaded_activations:
        acc.items.append(Item("host_offloaded_activations", tl.offloaded_activations, "host",
                              formula="activation_offload: every layer's saved tensors (>= 1 KiB, not parameters) "
                                      "copied to pinned host memory in the forward, brought back layer by layer in "
                                      "the backward",
                              source="formulas/activation_offload.py; " + OFFLOAD_SRC))
    for name, b in st.host.items():
        if b:
            acc.items.append(Item(f"host_{name}", b, "host",
                                  formula=f"offload={w.offload}: {name} kept in host RAM (pinned)",
                                  source=PAR_SRC + "; Ren et al. 2021 ZeRO-Offload section 4"))


def _grads_text(st: StageStates, w: TrainingWorkload, grad_b: int, main_grads: bool) -> str:
    """The gradients' full size in words that reproduce it: the trained elements x bytes, and where ZeRO-2/3 or FSDP
    shards them, each part over its ways (the dense ones over the shard group, the routed experts' over the expert
    data-parallel ranks: states.py ``stage_states``; Megatron's fp32 main grads over the optimizer's ways)."""
    _, g_ways, o_ways = model_state_ways(w, w.shard_group)
    _, ge_ways, oe_ways = model_state_ways(w, expert_group(w))
    flat_units = w.fsdp is not None and w.fsdp_version == 1 and w.adapters and w.fsdp1_lora_wrap == "with-layers"
    if st.save_elements and not flat_units and g_ways == ge_ways == 1 and not main_grads:  # modules_to_save copies
        return (f"{format_count(st.trained_elements - st.save_elements)} adapter x {grad_b} B + "
                f"{format_count(st.save_elements)} modules_to_save x {st.save_bytes} B")
    if flat_units or (g_ways == ge_ways == 1 and (not main_grads or o_ways == oe_ways == 1)):
        return (f"{format_count(st.trained_elements)} trained x {grad_b} B"
                + (" + 4 B fp32 main grads" if main_grads else ""))
    n_exp = st.expert_elements
    n_dense = st.trained_elements - n_exp

    def part(b: int, ways: int, e_ways: int) -> str:
        return (f"{format_count(n_dense)} trained x {b} B / {ways}"
                + (f" + {format_count(n_exp)} routed-expert x {b} B / {e_ways}" if n_exp else ""))

    return part(grad_b, g_ways, ge_ways) + (f" + fp32 main grads: {part(4, o_ways, oe_ways)}" if main_grads else "")


def _layout_text(w: TrainingWorkload, spec: ModelSpec) -> str:
    parts = []
    if w.tp > 1:
        plan = training_tp_framework(w.precision, w.framework)
        # the matrices the plan keeps whole that this model has (MLA's down-projections, the routers)
        whole = [name for has, name in ((spec.mla is not None, "MLA down-projections"), (spec.is_moe, "MoE routers"))
                 if has]
        parts.append(f"/ TP {w.tp}" + (f" ({plan}'s plan: {' and '.join(whole)} whole on every rank, "
                                       "formulas/tensor_parallel.py REPLICATED_MATRICES)" if plan and whole else ""))
    if w.pp > 1:
        parts.append(f"PP stage of {w.pp}")
    e_tp = expert_tp(w)
    if w.ep > 1:
        parts.append(f"experts / EP {w.ep}")
    if e_tp != w.tp:
        parts.append(f"experts / ETP {e_tp} (not / TP)")
    if w.shard_stage:
        kind = f"FSDP {w.fsdp}" if w.fsdp else f"ZeRO-{w.zero}"
        parts.append(f"{kind} over {w.shard_group}" + (
            f" (experts over {expert_group(w)}: the expert data-parallel ranks, "
            "formulas/parallelism.py expert_shard_group)" if w.ep > 1 or e_tp != w.tp else ""))
    return (" " + ", ".join(parts)) if parts else ""


def _activation_formula(ctx: TrainingContext, tl: StageTimeline) -> str:
    w = ctx.w
    # each distinct term tuple summed once (the layers alike share one: StageTimeline.terms_alike)
    alike = {id(terms): sum(t.bytes for t in terms) for terms, _ in tl.terms_alike()}
    n = len(tl.layer_terms)
    if len(set(alike.values())) == 1:  # every layer's sum the same (each layer holds one of the distinct tuples)
        first = min(tl.layer_terms)
        text = f"{n} layers x {format_bytes(alike[id(tl.layer_terms[first])])} (layer {first}: "
    else:  # layers of several kinds (a hybrid's, or those before the first adapter: eq. F1): the largest shown
        sums = {i: alike[id(terms)] for i, terms in tl.layer_terms.items()}
        first = max(sums, key=lambda i: (sums[i], -i))
        text = (f"{n} layers, {format_bytes(min(sums.values()))} to {format_bytes(sums[first])} each "
                f"(the largest, layer {first}: ")
    text += ", ".join(f"{t.name} {format_bytes(t.bytes)}" for t in tl.layer_terms[first] if t.bytes) + ")"
    if ctx.spec.encoder_decoder is not None:  # two kinds of block (formulas/encoder_decoder_activations.py E4)
        text = " + ".join(f"{sum(1 for x in tl.layer_terms.values() if x is terms)} x {format_bytes(sum(t.bytes for t in terms))} "
                          f"({terms[0].name}: {terms[0].formula})" for terms in {id(x): x for x in tl.layer_terms.values()}.values())
    every = f"every {w.checkpoint_every}-th layer " if w.checkpoint_every > 1 else ""
    if w.grad_checkpointing == "full":
        kept = "input in host RAM" if w.checkpoint_offload else "input kept"
        text = f"checkpointed {every or 'every layer '}({kept}, recomputed in the backward); " + text
    elif w.grad_checkpointing == "selective-op":
        op = op_sac_saved_terms(ctx.spec, first, ctx.act, compiled=compile_partitions_layers(w))
        text = (f"op-level selective checkpointing of {every or 'every layer'}: {format_bytes(sum(t.bytes for t in op))}"
                " kept per checkpointed layer (" + ", ".join(f"{t.name} {format_bytes(t.bytes)}" for t in op)
                + "); without it " + text)
    if tl.inflight_by_stage:  # formulas/parallelism.py interleaved_peak_inflight
        text += (" x each local stage's own in-flight micro-batches (Interleaved1F1B; at the rank's fullest point "
                 + " + ".join(map(str, tl.inflight_by_stage)) + " on its local stages)")
    elif tl.inflight > 1:
        text += f" x {tl.inflight} in-flight micro-batches (1F1B)"
    if w.compile:
        text += "; torch.compile: the min-cut partitioner's saved set (norms keep input + 1/rms, silu rebuilt)"
    if w.context_parallel > 1:
        text += (f"; context parallel {w.context_parallel}: {ctx.act.seq} of {w.seq_len} tokens per sequence on each "
                 "device")
    if w.activation_offload:
        text += ("; activation_offload: on the device only the layer in its backward (and at forward end the "
                 "last layer's stash), the rest on the host")
    return text


def _explain(ctx: TrainingContext, acc: Acc, tl: StageTimeline) -> None:
    rec, opt = ctx.recipe, ctx.optimizer
    sb = state_bytes_per_param(opt.name, ctx.state_bytes)
    if ctx.w.adapters:
        a = ctx.adapter_bytes
        base = ("NF4 (~0.5 B)" if ctx.base_format in ("nf4", "nf4-dq") else
                f"fp8-block (~1 B; the rest {ctx.base_bytes} B)" if ctx.base_format == "fp8-block"
                else f"{ctx.base_bytes} B")
        base += f" (routed experts and router {ctx.base_bytes} B)" if ctx.fused_experts else ""
        value = (f"adapters: {a + a + sb:g} B per trained param = {a} weights + {a} grads + {sb:g} {opt.name}; "
                 f"frozen base {base} per param, no gradients or states")
        acc.assumptions.append(Assumption("bytes_per_param", value, True, WHY_16_VS_18))
        return
    parts = [f"{rec.model_bytes} model"]
    # float8 converts the layers' linears, which autocast then never copies (formulas/float8_training.py
    # float8_autocast_copied; TransformerEngine quantizes from the parameter): the copy is no longer per trained
    # param, as the autocast_weight_copies item counts it
    float8_copies = bool(rec.autocast_bytes) and ctx.w.float8
    if rec.autocast_bytes and not float8_copies:
        parts.append(f"{rec.autocast_bytes} autocast copy")
    if rec.master_bytes:
        parts.append(f"{rec.master_bytes} fp32 master")
    parts.append(f"{rec.grad_bytes} grads")
    if rec.main_grad_bytes:
        parts.append(f"{rec.main_grad_bytes} fp32 main grads")
    parts.append(f"{sb:g} {opt.name}")
    total = rec.bytes_per_param(sb) - (rec.autocast_bytes if float8_copies else 0)
    value = f"{total:g} B per trained param = " + " + ".join(parts)
    if float8_copies:
        value += (f" (+ {rec.autocast_bytes} B autocast copy only of the linears left nn.Linear, as lm_head, MoE "
                  "router, shared expert: " + ("torchao's Float8Linears have none)" if ctx.w.float8_recipe in TORCHAO_RECIPES
                                               else "te.Linears have none)"))
    if ctx.w.float8 and ctx.w.float8_recipe in TE_RECIPES and ctx.w.fp8_params:
        cc = ctx.w.gpu_capability
        on = "Hopper's, the GPU not known" if cc is None else f"compute capability {cc // 10}.{cc % 10}"
        value += (f"; the te linears' weights are float8 parameters (fp8_param_gather): {fp8_param_bytes(1, cc)} B "
                  f"per element on {on} in place of the {ctx.base_bytes} B weight, and no float8 copy "
                  "(formulas/float8_training.py eq. T3)")
    elif ctx.w.float8 and ctx.w.float8_recipe in TE_RECIPES:
        cc = ctx.w.gpu_capability
        on = "Hopper's, the GPU not known" if cc is None else f"compute capability {cc // 10}.{cc % 10}"
        mx = ctx.w.float8_recipe == TE_MXFP8
        per = (f"{te_weight_copy_bytes(MXFP8_BLOCK, cc, recipe=TE_MXFP8) / MXFP8_BLOCK:g} B per element: a rowwise "
               "and a columnwise MXFP8 copy, 1 B each + one E8M0 scale per 32 elements each, eq. T1m" if mx else
               f"{te_weight_copy_bytes(1, cc)} B per element on {on}: eq. T1")
        value += (f"; + TransformerEngine's float8 copy of each te.Linear weight ({per}; fp8_weight_copies), "
                  + ("every layer's for the whole step (Megatron-Core passes is_first_microbatch: TE keeps it in "
                     "_fp8_workspaces, eq. T2)" if te_first_microbatch_cache(ctx.w) else
                     "per layer from its forward to its backward (as llm-foundry calls the te modules, without "
                     "is_first_microbatch: no _fp8_workspaces cache), none under FSDP2"))
    acc.assumptions.append(Assumption("bytes_per_param", value, True, WHY_16_VS_18))
    # The recipe adds up every state a step allocates; they are not all live at the peak (timeline.py).
    trained = count_params(ctx.spec).total
    live = {k: v for k, v in tl.peak.parts.items() if k in MODEL_STATE_PARTS and v}
    if trained and live:
        at_peak = sum(live.values()) / trained
        acc.assumptions.append(Assumption(
            "model_state_bytes_per_param_at_peak", round(at_peak, 2), True,
            f"live at the peak ({tl.peak.name}): " + " + ".join(f"{k} {v / trained:.2f}" for k, v in live.items())
            + " B/param (per device, after sharding). The per-param sum above never is live at once: the "
            "autocast half copies exist from the forward to the end of the backward, gradients appear during "
            "the backward (zero_grad(set_to_none=True) frees them after the step), so the peak holds less than "
            "the sum"))


# the kind of the warning below: the plan, whose memory line states the same ratio, marks it said (its text leaves
# it out, its JSON keeps it)
INFERENCE_SIZED = "inference_sized"


def fused_experts_warning(spec: ModelSpec, base_format: str, base_bytes: int) -> str:
    """The warning a QLoRA base of an MoE model carries: its routed experts and router are not 4-bit
    (formulas/nf4_quantization.py ``keeps_fused_experts``), so the base holds more bytes per parameter than a plain
    16-bit LoRA base; the bytes are the model's whole (before any TP / pipeline split), as weight_formats counts them."""
    wb = weight_bytes(spec, base_format, GROUP_SIZE_DEFAULT, base_bytes, True)
    kept = sum(wb.by_component.get(c, 0) for c in FUSED_KEPT)
    params = count_params(spec).total
    dtype = {4: "fp32", 2: "16-bit"}.get(base_bytes, f"{base_bytes}-byte")
    return (f"QLoRA of an MoE model: its routed experts and router ({format_count(kept // base_bytes)} of "
            f"{format_count(params)} params, {format_bytes(kept)}) stay {dtype} ({base_bytes} B each), not NF4: "
            "transformers 5 stores them as fused nn.Parameters and bitsandbytes replaces only nn.Linear ("
            f"{FUSED_EXPERTS_SOURCE}); the base holds {wb.total / params:.2f} B per param, more than a bf16 base's 2 "
            "(--method lora)")


def _warnings(ctx: TrainingContext, st: StageStates, tl: StageTimeline, acc: Acc) -> None:
    spec, w = ctx.spec, ctx.w
    # the plan's inference_need and ratio are these two numbers (one answer): the training estimate's device total
    # against what `infer` answers for the same sequences
    peak = sum(i.bytes for i in acc.items if i.location == "device")
    # the serving estimate only when the warning can hold: it is never below inference_sized_floor
    # (an encoder-decoder has no serving estimate, None: no comparison)
    # and only where each device holds all the weights, as serving on one device does (levers.py)
    inf = inference_sized(spec, w.micro_batch, w.seq_len, w.device, w.gpu_runtime) \
        if inference_comparable(w) and peak > inference_sized_floor(spec, w.device) else None
    if inf is not None and peak > inf:
        acc.warnings.append(KindedWarning(
            f"sized with inference numbers (estimate_inference: bf16, {w.micro_batch} sequence(s) of {w.seq_len} "
            f"tokens) this would be {format_bytes(inf)}; training needs {format_bytes(peak)} per device "
            f"({peak / max(inf, 1):.2f}x)", INFERENCE_SIZED))
    if ctx.optimizer.paged and st.paged_optimizer:  # offloaded (--offload), they are pinned host items instead
        acc.warnings.append("paged optimizer states are in CUDA unified memory: listed as a host item; they occupy "
                            "GPU memory when it is free and torch.cuda.max_memory_allocated does not count them")
    if ctx.fused_experts:  # setup.py qlora_fused_experts: the QLoRA base of an MoE model under transformers 5
        acc.warnings.append(fused_experts_warning(spec, ctx.base_format, ctx.base_bytes))
    if w.pp > 1:  # the schedule the timeline modelled (estimate/training/timeline.py stage_timeline)
        if tl.inflight_by_stage:  # formulas/parallelism.py interleaved_peak_inflight
            held = tl.inflight_by_stage
            how = (f"under Interleaved1F1B ({w.virtual_stages} stages a rank) it holds {sum(held)} micro-batches in "
                   f"flight at its fullest point ({' + '.join(map(str, held))} on its local stages)")
        else:  # formulas/parallelism.py inflight_microbatches
            how = (f"under 1F1B it keeps {tl.inflight} micro-batch{'es' if tl.inflight > 1 else ''} in flight "
                   f"(min(pp - rank, micro-batches) = "
                   f"min({w.pp - st.stage}, {w.grad_accumulation}))")
        acc.warnings.append(f"memory of the most loaded pipeline rank ({st.stage} of {w.pp}); {how}")
        if w.grad_accumulation < w.pp:
            acc.warnings.append(f"pipeline with {w.grad_accumulation} micro-batches < {w.pp} stages leaves bubbles; "
                                "set grad_accumulation >= pp")
        if w.virtual_stages > 1 and w.pipeline_split == "even" \
                and megatron_interleaved_split(spec.num_layers, w.pp, w.virtual_stages) is None:
            # Megatron's interleaved schedule (the even split's virtual stages): its own split rule cannot build it
            busiest = max(len(r) for r in pipeline_stage_layers(spec.num_layers, w.pp))
            acc.warnings.append(
                f"Megatron-Core cannot split {spec.num_layers} layers over pp {w.pp} x {w.virtual_stages} virtual "
                f"stages by its own rule (the layers a rank holds must divide by the virtual stages, with or without "
                f"account_for_embedding/loss or num_layers_in_first/last_pipeline_stage: transformer_block.py "
                f"get_num_layers_to_build lines 133, 158, 178 @d98e8a64); it runs only with a "
                f"--pipeline-model-parallel-layout, which this estimate does not read: sized as the even split, "
                f"{busiest} layers on the busiest rank")
    if spec.recurrent_layer_count and spec.recurrent is not None and spec.recurrent.kind == "gated_deltanet":
        kernel = ("transformers' torch fallback (torch_chunk_gated_delta_rule, fp32 chunk intermediates)"
                  if ctx.act.recurrent_kernel == "torch" else
                  "flash-linear-attention's chunk_gated_delta_rule and causal-conv1d installed (without them "
                  "transformers falls back to its torch path, which keeps several times more)")
        acc.warnings.append(f"{spec.recurrent_layer_count} Gated DeltaNet layers: saved activations as {kernel}")
    if spec.is_moe:
        acc.warnings.append("MoE: routed-expert activations assume balanced routing; the range's high end allows "
                            "a 1.25 capacity factor (Switch Transformer section 2.2)")
    if w.gpus > 1:
        acc.warnings.append(f"memory is per device, for the most loaded of {w.gpus} devices")
    if spec.max_position_embeddings and w.seq_len > spec.max_position_embeddings:
        acc.warnings.append(f"seq_len {w.seq_len} exceeds the model's max_position_embeddings "
                            f"{spec.max_position_embeddings}")
    if w.attention == "eager":
        acc.warnings.append("eager attention keeps the [batch, heads, seq, seq] score matrix per layer; sdpa/flash "
                            "do not")
    if w.loss == "linear-ce" and w.compile and w.compile_scope != "layers":
        acc.warnings.append("compile with loss linear-ce: torchtune compiles each chunk's cross-entropy "
                            "(LinearCrossEntropyLoss.apply_compile_strategy, pytorch/torchtune @bd2a0fc "
                            "torchtune/modules/loss/cross_entropy_loss.py lines 54-65); what the compiled chunks save "
                            "is not modelled: the eager chunks' tensors are counted (fp32 log-softmax and gradients "
                            "per chunk)")


def _details(ctx: TrainingContext, st: StageStates, tl: StageTimeline,
             results: list[tuple[StageStates, StageTimeline]]) -> dict[str, Any]:
    spec, w = ctx.spec, ctx.w
    pc = count_params(spec)
    first, last = min(tl.layer_terms), max(tl.layer_terms)
    keep = {"model init", "forward, last layer attention", "forward end", "loss backward", "backward end",
            "optimizer step", f"backward layer {first}",
            f"backward layer {last}"}
    return {
        "params_total": pc.total, "params_active": pc.active, "attention": spec.attention_kind,
        "params_trainable": ctx.lora.total if ctx.lora else pc.total,
        "model_states": {"weights": st.weights, "adapter_weights": st.adapter_weights, "master_weights": st.master,
                         "gradients": st.grads + st.main_grads,
                         "optimizer_states": st.optimizer + st.paged_optimizer + st.host.get("optimizer_states", 0)},
        "tensor_peak_bytes": tl.peak.total,
        "saved_activations_bytes": next(p.parts.get("activations", 0) for p in tl.phases if p.name == "forward end"),
        "phases": {p.name: p.total for p in tl.phases if p.name in keep},
        "peak_parts": dict(tl.peak.parts),
        "layer_terms": [{"name": t.name, "bytes": t.bytes, "formula": t.formula} for t in tl.layer_terms[first]],
        "korthikanti_layer_bytes": korthikanti_layer_bytes(w.seq_len, w.micro_batch, spec.hidden_size,
                                                           spec.num_heads, w.tp, w.sequence_parallel),
        "stage_peaks": {r[0].stage: r[1].peak.total for r in results},
    }


def explain_recipe(precision: str, optimizer: str = "adamw") -> str:
    """One line: bytes per trained parameter of a recipe + optimizer, and why sources say 16 or 18."""
    rec, opt = recipe(precision), optimizer_info(optimizer)
    sb = state_bytes_per_param(opt.name, 4 if rec.default_state_dtype == "fp32" else 2)
    return f"{precision} + {optimizer}: {rec.bytes_per_param(sb):g} B/param. {WHY_16_VS_18}"
