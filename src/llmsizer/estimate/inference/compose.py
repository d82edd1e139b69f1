"""Inference memory: the composition layer. Unpacks specs, calls formulas, records every default.

    memory = weights + KV cache + activation workspace + runtime overhead
(seed 000, "Estimation formula for inference resource usage"), each term from ``formulas/``, and how an
engine allocates them from ``estimate/engines.py`` and the engine modules beside this one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...catalog.hardware import Device
from ...errors import DeviceCannotRunError, FieldError, InputError
from ...formulas.dtypes import DTYPE_BYTES
from ...formulas.kv_cache import KV_DTYPE_AUTO, KV_DTYPE_NAMES, kv_cache, kv_dtype_name, resolve_kv_dtype
from ...formulas.nf4_quantization import FUSED_EXPERTS_WHY
from ...formulas.params import count_params
from ...formulas.serving_expert_parallel import (
    SGLANG_LAYER_COMPONENTS,
    expert_split_weights,
    full_group_weights,
    moe_split,
    sequences_per_rank,
    uneven_experts_refusal,
)
from ...formulas.tensor_parallel import (
    QUANT_SHARD_FORMATS,
    check_tensor_parallel,
    every_degree_refusal,
    mamba2_layout_refusal,
    quant_block_refusal,
    serving_tensor_parallel_refusal,
    shard_weights,
    transformers_tensor_parallel_refusal,
    width_refusal,
)
from ...formulas.vllm_mixer_profile import vllm_profile_mixer_modelled
from ...formulas.weight_formats import GROUP_SIZE_DEFAULT, VLLM_FP32_GATE, vllm_gate_fp32, weight_bytes
from ...result import Assumption, Estimate, Location, Notes
from ...specs import InferenceWorkload, ModelSpec
from ...specs.training import default_mamba_path
from ...specs.workload import ENGINE_NAMES, check_pool_shares, refuse_pipeline_engine
from ...units import format_bytes
from .. import engines as E
from .. import ranges as R
from ..allocator import (
    INFERENCE,
    apply_metric,
    calibrated_need,
    cap_growth_at_memory,
    releasable_at,
    releasable_growth,
    verdict_need_range,
)
from ..context_window import (
    Window,
    engine_window,
    refusal_reason,
    unchecked_warning,
    window_allowed,
    window_details,
    window_refusal,
)
from ..device import (
    check_engine_on_device,
    detect_named,
    engine_assumption,
    generic_device,
    refuse_pipeline_apart,
    refuse_split_apart,
    refuse_tensor_parallel_apart,
    weights_capability,
    workload_on_device,
)
from ..formats import (
    GROUPED,
    check_engine_runs,
    engine_dtype_note,
    engine_weights,
    kv_shared_weights_assumption,
    nvfp4_kernel_note,
    resident_file_weights,
    serving_fused_experts,
    serving_weight_spec,
)
from ..model_warnings import model_note_assumptions, model_warnings, mtp_assumptions, refuse_serving, refuse_unmodelled
from ..verdict import (
    admission_verdict,
    binding_pool,
    binding_pool_words,
    check_headroom,
    decimal_memory_note,
    margin_rule,
    memory_verdict,
    pool_admits,
    sglang_pool_words,
    vllm_pool_words,
)
from .common import Acc, Context, running_and_queued, running_sequences, state_dtypes, state_of
from .media import Media, media_in_context


def _router_capability(spec: ModelSpec, w: InferenceWorkload, fmt: str, acc: Acc) -> int | None:
    """The device's CUDA compute capability as the weights' dtype rules read it (formulas/weight_formats.py
    ``engine_tensor_bytes``): 0 on a device the engine runs without CUDA (a CPU, ROCm, Metal), else the workload's
    ``gpu_capability`` (None: not known), for a model whose router dtype the device decides on this engine, else None
    (``weights_capability``: one cache entry per model, not per device). Where it decides a router's dtype (vLLM's fp32 gate, ``vllm_gate_fp32``),
    the dtype is recorded as an assumption."""
    capability = weights_capability(w.device, w.gpu_runtime, w.gpu_capability, w.engine, spec.model_type)
    if w.engine == "vllm" and spec.model_type in VLLM_FP32_GATE and spec.moe is not None and fmt != "file":
        fp32 = vllm_gate_fp32(capability)
        where = ("no CUDA" if capability == 0 else "compute capability not known: sized as on Hopper"
                 if capability is None else f"compute capability {capability // 10}.{capability % 10}")
        # a default on every device (review33 N1): no surface takes a router dtype or a capability from the user
        # (the CLI, request files and the web take a device, whose catalog row gives the capability:
        # inference_device_fields; fit and plan pass that capability on), so ``gpu_capability`` in ``given`` says
        # how the caller built the workload, not that the user stated it (A100 and MI300X alike: the device decided)
        acc.assumptions.append(Assumption(
            "router_dtype", "fp32" if fp32 else "model dtype", True,
            f"vLLM builds {spec.model_type}'s router as GateLinear(force_fp32_compute=True) (vllm 0.19.1 models/"
            "nemotron_h.py:151-157), stored in fp32 unless the GPU has its specialized router kernels, CUDA "
            "compute capability 9.0 or 10.x (layers/fused_moe/router/gate_linear.py:45-55): "
            f"{where}"))
    return capability


def _resolve_weights(spec: ModelSpec, w: InferenceWorkload, acc: Acc) -> tuple[str, int]:
    given = w.given or ()
    choice = engine_weights(spec, str(w.engine), w.weights, w.group_size, "group_size" in given,
                            w.dtype if "dtype" in given else None)
    acc.assumptions.extend(choice.assumptions)
    acc.warnings.extend(choice.warnings)
    return choice.fmt, choice.group_size


# An AWQ checkpoint runs in fp16: AutoAWQ loads the model it quantizes and writes it in float16
# (casper-hansen/AutoAWQ awq/models/base.py ``from_pretrained(torch_dtype=torch.float16)`` @ 93d7e8e0, "may not work
# with other values than float16"), so its config's torch_dtype is float16, the dtype vLLM's --dtype auto takes; and
# vLLM refuses another activation dtype for AWQ's own kernel (vllm/model_executor/layers/quantization/awq.py L43-44
# @ 92d756e9: ``get_supported_act_dtypes`` -> [torch.half]; vllm/config/vllm.py ``_get_quantization_config`` @
# 09f030ea: "... is not supported for quantization method ..." when the model dtype is not among them; awq_marlin,
# Ampere and newer, takes fp16 or bf16, awq_marlin.py L118-120 @ 0322f292). A catalog model asked at awq-int4 is
# that checkpoint, so it takes fp16 as an AWQ folder does (its torch_dtype float16); bytes do not move (2 bytes).
AWQ_DTYPE_WHY = ("an AWQ checkpoint is written in fp16 (AutoAWQ), the dtype vLLM's --dtype auto takes and its AWQ "
                 "kernel requires")


def _compute_dtype(spec: ModelSpec, w: InferenceWorkload, fmt: str, acc: Acc) -> str:
    if fmt in ("fp32", "gguf:f32"):
        default, why = "fp32", "fp32 weights compute in fp32"
    elif (spec.torch_dtype or "").lower() == "float16":
        default, why = "fp16", "checkpoint torch_dtype float16"
    elif fmt == "awq-int4" and str(spec.quantization_config.get("quant_method", "")).lower() != "awq":
        default, why = "fp16", AWQ_DTYPE_WHY  # a model asked at AWQ: the AWQ checkpoint's dtype, not the base's
    else:
        default, why = "bf16", "bf16 compute (torch_dtype of the checkpoint or the usual choice)"
    return str(acc.assume("dtype", default, w.dtype, why + "; activations and unquantized tensors use it"))


def engine_kv_dtypes(engine: str | None) -> tuple[str, ...]:
    """The KV cache dtypes a workload on ``engine`` takes, the one list: the ones the engine stores
    (E.EngineProfile.kv_dtypes) and ``auto`` (_kv_dtype resolves it for every engine); no engine (chosen later by
    the device): every name (formulas/kv_cache.py KV_DTYPE_NAMES). check_engine_kv_dtype refuses the others; the
    web's KV dtype select offers these (web/pages.py choices)."""
    if engine is None:
        return KV_DTYPE_NAMES
    return (*E.PROFILES[engine].kv_dtypes, KV_DTYPE_AUTO)


def check_engine_kv_dtype(engine: str, kvd: str, model_dtype: str | None = None) -> None:
    """FieldError on ``kv_dtype`` when ``engine`` cannot store a KV cache of dtype ``kvd`` (engine_kv_dtypes:
    refused, not sized), naming what the engine stores (and what stores it, E.EngineProfile.kv_dtypes_why) and the
    engines that can; with ``model_dtype`` (the model's activation dtype), also an unquantized dtype the engine
    stores only as the model's own (E.EngineProfile.kv_dtypes_model_only: vLLM) on a model of another dtype; such a
    dtype, outside the engine's own list (vLLM's fp16, fp32), is taken when the model's dtype is not known yet and
    judged by the estimate. Read by every estimate, and by recommend before its search (without the model dtype)."""
    profile = E.PROFILES[engine]
    name = kv_dtype_name(kvd)  # validates the name
    if name in profile.kv_dtypes_model_only:  # the model's own dtype: the engine's 'auto' (judged with the model)
        if model_dtype is None or name == kv_dtype_name(model_dtype):
            return
        raise FieldError("kv_dtype", f"engine {profile.name} stores its KV cache in {name} only for a model in {name} (its "
                         f"'auto'), not for this {model_dtype} one ({profile.kv_dtypes_model_only_why}); give "
                         f"kv_dtype auto or {_fp8_name(profile)}, or dtype {name}", also=("dtype",))
    if name not in engine_kv_dtypes(engine):
        owners = [p.name for p in E.PROFILES.values() if name in p.kv_dtypes]
        raise FieldError("kv_dtype", f"engine {profile.name} has no {kvd!r} KV cache; it stores "
                         f"{', '.join(profile.kv_dtypes)}"
                         + (f" ({profile.kv_dtypes_why})" if profile.kv_dtypes_why else "")
                         + (f"; {kvd}: engine {', '.join(owners[:-1])}{' or ' if len(owners) > 1 else ''}{owners[-1]}"
                            if owners else ""))


def _fp8_name(profile: E.EngineProfile) -> str:
    """The engine's own name of its FP8 KV cache (vLLM fp8, SGLang fp8_e4m3), offered in a refusal."""
    return next((d for d in profile.kv_dtypes if d.startswith("fp8")), KV_DTYPE_AUTO)


def check_quantized_cache_layers(engine: str, kvd: str, spec: ModelSpec) -> None:
    """FieldError on ``kv_dtype`` when transformers would store the ``kvd`` cache in a QuantizedCache
    (E.TRANSFORMERS_QUANTIZED_KV) and the model has a layer that is not full attention: QuantizedCache raises
    ValueError for any layer type but "full_attention" (transformers 5.24.0 cache_utils.py L2236-2243), and
    get_layer_types_and_kwargs (L1959-1988) gives sliding, chunked, recurrent / linear-attention, KV-sharing and
    MLP-only layers types of their own. A cross-attention layer (Llama-3.2-Vision) is a full-attention layer there."""
    if engine != "transformers" or kv_dtype_name(kvd) not in E.TRANSFORMERS_QUANTIZED_KV:
        return
    other = [f"{n} {kind}" for kind, n in (
        ("sliding-window", spec.layer_types.count("sliding")),
        ("recurrent / attention-free", sum(t == "none" and not c for t, c in zip(
            spec.layer_types, spec.cross_attention_layers or (False,) * spec.num_layers, strict=False))),
        ("KV-sharing", sum(spec.kv_shared_layers))) if n]
    if other:
        raise FieldError("kv_dtype", f"engine transformers stores a KV cache of {kv_dtype_name(kvd)} only in QuantizedCache, "
                         f"which refuses a model with layers other than full attention (transformers 5.24.0 "
                         f"cache_utils.py L2236-2243); {spec.name} has {', '.join(other)} layers: give kv_dtype auto "
                         f"or bf16, or another engine (vllm)")


def _kv_dtype(w: InferenceWorkload, profile: E.EngineProfile, dtype: str, acc: Acc, spec: ModelSpec) -> str:
    """The KV cache dtype, the one place it is resolved: the engine's default, or the given one, ``auto`` being the
    model's activation dtype ``dtype`` (formulas/kv_cache.py KV_DTYPE_AUTO: vLLM, SGLang), or, for an engine with no
    'auto' (llama.cpp), its default (E.EngineProfile.kv_dtype_auto_why says why), said in the assumption."""
    default = dtype if profile.kv_dtype_default == "model" else profile.kv_dtype_default
    # SGLang's own 'auto' (its default) where it is FP8 for this model on this device (E.sglang_auto_kv_dtype)
    engine_auto = (E.sglang_auto_kv_dtype(spec, w.device, w.gpu_runtime, w.gpu_capability)
                   if profile.name == "sglang" else None)
    if w.kv_dtype is not None and kv_dtype_name(w.kv_dtype) == KV_DTYPE_AUTO:
        if engine_auto is not None:
            kvd, why = engine_auto[0], f"auto -> {engine_auto[0]}: {engine_auto[1]}"
        elif profile.kv_dtype_auto_why is None:
            kvd = resolve_kv_dtype(w.kv_dtype, dtype)
            why = f"auto -> {kvd}: the model's dtype, as vLLM's and SGLang's kv_cache_dtype=auto"
        else:
            kvd, why = default, f"auto -> {default}: {profile.kv_dtype_auto_why}"
        acc.assumptions.append(Assumption("kv_dtype", kvd, False, why))
    elif engine_auto is not None:
        kvd = str(acc.assume("kv_dtype", engine_auto[0], w.kv_dtype,
                             f"{profile.name} default KV cache dtype (kv_cache_dtype auto): {engine_auto[1]}"))
    else:
        kvd = str(acc.assume("kv_dtype", default, w.kv_dtype, f"{profile.name} default KV cache dtype"))
    check_engine_kv_dtype(profile.name, kvd, dtype)
    refusal = (E.sglang_kv_dtype_refusal(spec, kv_dtype_name(kvd), w.device, w.gpu_runtime, w.gpu_capability)
               if profile.name == "sglang" else None)
    if refusal is not None:  # a refusal of this device only: a rejected option in a search (recommend)
        raise (DeviceCannotRunError if refusal[1] else FieldError)("kv_dtype", refusal[0])
    check_quantized_cache_layers(profile.name, kvd, spec)
    if w.kv_dtype is not None and kv_dtype_name(w.kv_dtype) in profile.kv_dtypes_model_only:
        acc.assumptions.append(Assumption(f"{profile.name}_kv_cache_dtype", KV_DTYPE_AUTO, False,
                                          f"auto -> {kvd}: the {kv_dtype_name(w.kv_dtype)} KV cache is "
                                          f"{ENGINE_NAMES[profile.name]}'s kv_cache_dtype auto with a {dtype} model"))
    if profile.name == "transformers" and kv_dtype_name(kvd) not in ("fp32", "fp16", "bf16"):
        acc.warnings.append("transformers' default DynamicCache stores K/V in the activation dtype; a "
                            f"{kvd} KV cache needs {E.transformers_kv_backend(kv_dtype_name(kvd))}")
    return kvd


def estimate_inference(model: ModelSpec | str, workload: InferenceWorkload | None = None, **kwargs: Any) -> Estimate:
    """Estimate the memory to serve ``model`` under ``workload`` (or keyword fields of InferenceWorkload).

    Returns an :class:`~llmsizer.result.Estimate`: items (each with formula, source and range), the
    assumptions applied (defaults flagged) and warnings.

    >>> est = estimate_inference("qwen2.5-0.5b", context=4096, concurrency=1)
    >>> est.item("weights").bytes > 0
    True
    """
    if workload is not None and kwargs:
        raise InputError("give either a workload or keyword fields, not both")
    if isinstance(model, ModelSpec):
        spec = model
    else:
        from ...models import spec_of  # a name, or something else refused naming `model`
        spec = spec_of(model)
    refuse_unmodelled(spec, training=False)
    kwargs = detect_named(kwargs)  # 'detected': this machine, detected now (not memoized: a Detection is no key)
    # memoized on exactly what the estimate reads: the spec (by identity: specs are frozen and the memo keeps the
    # object alive) and the workload, field by field with each value's type (1 and 1.0, True and 1 are different
    # keys) -- or, when called with keyword fields, those names and values (a hit skips building the workload,
    # which validated the same fields the first time). A catalog-wide search asks the same question for every
    # device of one memory size; `plan` for every job.
    if workload is None:
        key: tuple[Any, ...] = (id(spec), True, tuple(kwargs.items()), tuple(map(type, kwargs.values())))
    else:
        key = _workload_key(spec, workload)
    try:
        hit = _MEMO.get(key)
    except TypeError:  # an unhashable value: no memo
        key, hit = (), None
    if hit is not None and hit[0] is spec:
        return _copy(hit[1])
    w, notes, device = _workload_on_its_device(kwargs if workload is None else workload, "estimate_inference",
                                               spec)
    check_engine_on_device(str(w.engine), device)  # a named device: Apple silicon is a 'gpu' workload, not CUDA
    refuse_tensor_parallel_apart(device, w.tensor_parallel)  # fit's rule for a CPU, an Apple chip, a MIG device
    refuse_pipeline_apart(device, w.pipeline_parallel)  # MIG devices: no NCCL group over them
    refuse_split_apart(device, w.gpus)  # llama.cpp's split over MIG devices or Apple chips: fit's replicas
    refuse_split_apart(device, len(w.tensor_split or ()), "tensor_split")
    est = with_serving_notes(_estimate(spec, w), notes)
    # a format the engine will not load on this GPU, or a dtype it replaces (fit applies the same rules)
    fmt = str(est.details.get("weights_format"))
    check_engine_runs(str(w.engine), fmt, device, spec)
    if w.async_scheduling:  # recorded: vLLM --async-scheduling moves the speed's host step only (fit), not the memory
        rule = E.step_host(str(w.engine), w.engine_version, True)
        est = Estimate(est.kind, est.model, est.items, (*est.assumptions, Assumption(
            "async_scheduling", True, False,
            f"given: {rule.versions if rule else 'vLLM'}, the host step overlapped with the device step "
            "(formulas/speed.py eq. 14; estimate/engines.py step_host), which the speed estimate (fit, recommend, "
            "plan) reads; the memory is unchanged")), est.warnings, est.details)
    if w.engine_version is not None:  # recorded: the memory is the profile's; the release moves the speed (fit)
        rule = E.step_host(str(w.engine), w.engine_version, w.async_scheduling)
        est = Estimate(est.kind, est.model, est.items, (*est.assumptions, Assumption(
            "engine_version", w.engine_version, False,
            f"{rule.versions if rule else w.engine_version}: picks the engine's host work per decode step "
            "(estimate/engines.py step_host), which the speed estimate (fit, recommend, plan) reads; the memory "
            "profile is the current release's")), est.warnings, est.details)
        newer = E.newer_release_note(str(w.engine), w.engine_version)
        if newer is not None:
            est = Estimate(est.kind, est.model, est.items, est.assumptions, (*est.warnings, newer), est.details)
    # last, as fit says it (its estimate is on the device's kind; fit adds this note for the device itself)
    notes_here = (engine_dtype_note(str(w.engine), fmt, _assumed(est, "dtype"), device),
                  nvfp4_kernel_note(str(w.engine), fmt, device))
    for note in filter(None, notes_here):
        est = Estimate(est.kind, est.model, est.items, est.assumptions, (*est.warnings, note), est.details)
    if key:
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.clear()
        _MEMO[key] = (spec, est)
    return _copy(est)


_MEMO: dict[tuple[Any, ...], tuple[ModelSpec, Estimate]] = {}
_MEMO_SIZE = 4096


def inference_workload(given: InferenceWorkload | dict[str, Any], asker: str, spec: ModelSpec | None
                       ) -> tuple[InferenceWorkload, tuple[Assumption, ...]]:
    """The workload an estimate composes, its device and engine decided, and the assumptions that record them.
    ``given``: a workload, or its keyword fields, where ``device`` may also name a catalog device or instance
    (``estimate/device.py`` ``workload_on_device``, the resolver `infer --device`, the web API and `fit` share:
    the device kind, its usable memory when none is given, and the assumptions naming both). With no engine
    given, the engine is ``estimate/device.py`` ``engine_rule``'s for that device (a workload object's ``gpu``/``cpu``
    is a device known only by its kind), recorded as ``engine=<name> (default for <device>: <reason>)``; ``spec``: the
    model, whose checkpoint format the rule checks the engine runs on that GPU."""
    w, notes, _device = _workload_on_its_device(given, asker, spec)
    return w, tuple(notes.assumptions)


def _workload_on_its_device(given: InferenceWorkload | dict[str, Any], asker: str, spec: ModelSpec | None
                            ) -> tuple[InferenceWorkload, Notes, Device]:
    """``inference_workload``, its notes (the device's, ``estimate/device.py`` ``workload_on_device``: assumptions
    and warnings; the engine's default) and the Device it resolved (a generic one for a workload object's kind)."""
    if isinstance(given, InferenceWorkload):
        w, device, target = given, generic_device(given.device), given.device
        notes = Notes()
    else:
        fields, device, target, notes = workload_on_device(given, asker)
        if fields.get("engine") is None:  # built once with the default engine, which stays out of ``given``
            eng, note = engine_assumption(None, device, fields.get("tensor_parallel") or 1, fields.get("weights"),
                                          target, spec, fields)
            passed = frozenset(k for k, v in fields.items() if v is not None)
            notes.assumptions.append(note)
            return InferenceWorkload(**dict(fields, engine=eng), given=passed), notes, device
        w = InferenceWorkload(**fields)
    if w.engine is None:  # replace keeps ``given``: the engine stays a default, and the fields are checked for it
        eng, note = engine_assumption(None, device, w.tensor_parallel, w.weights, target, spec, w)
        w = dataclasses.replace(w, engine=eng)
        notes.assumptions.append(note)
    return w, notes, device


def inference_sized(spec: ModelSpec, micro_batch: int, seq_len: int, device: str = "gpu",
                    gpu_runtime: str = "cuda") -> int | None:
    """What a training run of ``micro_batch`` sequences of ``seq_len`` tokens would be given if sized as serving
    (the classic mistake a plan checks for): the expected device total of ``estimate_inference`` with bf16 weights
    and compute and that many sequences of that length. The one number ``train``'s warning and the plan's
    ``inference_need`` compare the training estimate with. None for an encoder-decoder (T5): a training step has a
    source and a target length, and serving one (sized on transformers) is not the mistake this check looks for."""
    if spec.encoder_decoder is not None:
        return None
    est = estimate_inference(spec, context=seq_len, concurrency=micro_batch, weights="bf16", dtype="bf16",
                             device=device, gpu_runtime=gpu_runtime)
    return est.total("host" if device == "cpu" else "device")[1]  # on a CPU the tensors are in host RAM


def inference_sized_floor(spec: ModelSpec, device: str = "gpu") -> int:
    """A lower bound of ``inference_sized`` on ``device`` for every batch and length: on a GPU its estimate's bf16
    weights item (every other item is non-negative); 0 on a CPU, where llama.cpp's gguf:bf16 keeps some tensors in
    smaller types (gpt-oss's MXFP4 experts). Lets a caller that only compares a number with ``inference_sized`` skip
    the estimate when the number cannot exceed it (tests/consistency/test_inference_sized.py checks the bound on the
    whole catalog)."""
    if device == "cpu":
        return 0
    return weight_bytes(spec, "bf16", GROUP_SIZE_DEFAULT, DTYPE_BYTES["bf16"]).total


def _assumed(est: Estimate, name: str) -> str:
    """The value the estimate assumed for ``name`` ('' when it assumed none)."""
    return next((str(a.value) for a in est.assumptions if a.name == name), "")


def with_serving_notes(est: Estimate, notes: Notes) -> Estimate:
    """``est`` with the device's assumptions and warnings first (``estimate/device.py`` ``target_memory`` and
    ``named_device_notes``, as fit says them) and the engine's default, when chosen, in place of the engine profile's
    line. The one path: ``estimate_inference(device=)`` (so `infer --device`) and ``fit``'s estimate (``fit_memory``)
    both state a named device so."""
    if not notes.assumptions and not notes.warnings:
        return est
    engine = [a for a in notes.assumptions if a.name == "engine"]
    first = tuple(a for a in notes.assumptions if a.name != "engine")
    rest = tuple(engine[0] if engine and a.name == "engine" else a for a in est.assumptions)
    return Estimate(est.kind, est.model, est.items, first + rest, (*notes.warnings, *est.warnings), est.details)


def _workload_key(spec: ModelSpec, w: InferenceWorkload) -> tuple[Any, ...]:
    vals = tuple(w.__dict__.values())
    return (id(spec), False, vals, tuple(map(type, vals)))


def _memoized(spec: ModelSpec, w: InferenceWorkload) -> Estimate:
    """The estimate of ``w`` through the memo (shared object: read it, do not change it)."""
    key = _workload_key(spec, w)
    try:
        hit = _MEMO.get(key)
    except TypeError:
        return _estimate(spec, w)
    if hit is not None and hit[0] is spec:
        return hit[1]
    est = _estimate(spec, w)
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.clear()
    _MEMO[key] = (spec, est)
    return est


def _copy(est: Estimate) -> Estimate:
    """The memoized estimate with its own ``details`` dict (the one mutable part: a caller adding or replacing a
    key does not change another's; nested values are shared and, like weight_bytes' cached results, read-only)."""
    out = Estimate(est.kind, est.model, est.items, est.assumptions, est.warnings, dict(est.details))
    out.__dict__["_totals"] = est.__dict__.setdefault("_totals", {})  # same items, same sums (Estimate.total)
    return out


def _estimate(spec: ModelSpec, w: InferenceWorkload) -> Estimate:
    if w.engine is None:  # composed with the engine decided (estimate_inference does it first, with its notes)
        w = inference_workload(w, "estimate_inference", spec)[0]
    check_pool_shares(w.engine, w.headroom, w.gpu_memory_utilization)
    if w.engine == "vllm" and w.headroom is not None and w.gpu_memory_utilization is None:
        # one convention: vLLM's pool is what the headroom leaves
        w = dataclasses.replace(w, gpu_memory_utilization=1 - w.headroom)
    if w.memory is not None and w.engine not in ("vllm", "sglang"):
        # Only vLLM's and SGLang's compositions read the memory (it sizes the KV pool from it); for the other engines the
        # breakdown is the same for every budget, so it is composed once without one (memoized) and checked
        # against this budget here -- what the end of this function does with the same breakdown.
        base = _memoized(spec, w.without_memory())
        acc = Acc()
        acc.warnings.extend(base.warnings)
        details = dict(base.details)
        est = Estimate("inference", spec.name, base.items, base.assumptions, base.warnings, details)
        est.__dict__["_totals"] = base.__dict__.setdefault("_totals", {})  # same items, same sums
        items, capped = base.items, dict[str, object]()
        if w.metric in ("reserved", "nvidia-smi") and w.device != "cpu":  # the growth's reserve at most the memory
            items, capped = cap_growth_at_memory(items, details, int(w.memory), str(w.metric), w.gpu_runtime)
        shown = capped.get("kv_growth_releasable")
        _check_fit(est, w, acc, None if shown is None else int(shown[1]))  # type: ignore[index]
        details.update(capped)  # after the verdict, which reads the uncapped figures (the need is the same)
        return Estimate("inference", spec.name, items, base.assumptions + tuple(acc.assumptions),
                        tuple(acc.warnings), details)
    check_engine_on_device(str(w.engine), generic_device(w.device))  # known by its kind here; Apple: estimate_inference
    if w.pipeline_parallel > 1:  # each stage composed by itself; the binding one answers (pipeline.py eq. PP2)
        from .pipeline import pipeline_refusal, worst_stage
        refuse_pipeline_engine(str(w.engine), w.device, w.gpu_runtime)
        pipeline_refusal(spec, w)
        return worst_stage(spec, w, lambda stage: _finish(spec, _compose(spec, w, None, stage)))
    key = _sized_key(spec, w)
    ctx = _resized(spec, w, key) if key is not None else None
    if ctx is None:
        ctx = _compose(spec, w, key)
    return _finish(spec, ctx)


# the concurrency's assumption: what it is, given or InferenceWorkload's default (every input that sizes the KV cache
# and activations is named, _compose)
_SIZING_WHY = (("context", "tokens per sequence, prompt + output (InferenceWorkload's default)"),
               ("concurrency", "sequences at once (InferenceWorkload's default)"))


def _sizing_assumption(acc: Acc, w: InferenceWorkload, name: str, why: str) -> None:
    """Name ``w``'s ``name`` (context, concurrency) in ``acc``: as given, or the default."""
    acc.assume(name, getattr(w, name), getattr(w, name) if name in (w.given or ()) else None, why)


def _data_parallel_rank(spec: ModelSpec, w: InferenceWorkload, acc: Acc) -> InferenceWorkload:
    """``w`` as one of its ``data_parallel`` ranks holds it (formulas/serving_expert_parallel.py eq. EP3: ceil(C / D)
    of its sequences), the layout named in ``acc``; ``expert_parallel`` on a model with no routed experts refused."""
    given = w.given or ()
    if w.expert_parallel and not spec.is_moe:
        raise FieldError("expert_parallel", f"expert_parallel: {spec.name} has no routed experts (not an MoE model); "
                         "give data_parallel alone for data-parallel ranks, or leave it out")
    if w.expert_parallel or "expert_parallel" in given:
        acc.assume("expert_parallel", False, w.expert_parallel if "expert_parallel" in given else None,
                   "routed experts tensor-parallel (vLLM without --enable-expert-parallel)")
    if w.data_parallel == 1 and "data_parallel" not in given:
        return w
    acc.assume("data_parallel", 1, w.data_parallel if "data_parallel" in given else None,
               "one engine rank per replica (InferenceWorkload's default)")
    if w.data_parallel == 1:
        return w
    per = sequences_per_rank(w.concurrency, w.data_parallel)
    acc.assumptions.append(Assumption(
        "sequences_per_rank", per, True,
        f"each of {w.data_parallel} data-parallel ranks runs and caches its own ceil({w.concurrency} / "
        f"{w.data_parallel}) sequences (formulas/serving_expert_parallel.py eq. EP3); memory and speed are one "
        "rank's"))
    exchange = ("every decoder layer's gather and reduce-scatter of the ranks' hidden states (SGLang's attention DP) "
                "is timed by formulas/serving_expert_parallel.py eq. EP4s" if w.engine == "sglang" else
                "an MoE layer's token exchange over the ranks is timed by formulas/serving_expert_parallel.py eq. EP4")
    acc.warnings.append(f"memory and speed are one data-parallel rank's at {per} sequences (fit's total counts every "
                        f"rank; {exchange}); the ranks' load imbalance is not modelled")
    return dataclasses.replace(w, concurrency=per)


def _with_media(w: InferenceWorkload, media: Media | None) -> InferenceWorkload:
    """``w`` with its image/video tokens in the context: they occupy it like text (KV cache, prefill, admission)."""
    return w if media is None else dataclasses.replace(w, context=w.context + media.tokens)


def _compose(spec: ModelSpec, w: InferenceWorkload, key: tuple[Any, ...] | None,
             stage: int | None = None) -> Context:
    """The engine's composition of ``w`` (its items, assumptions, warnings and details), before ``_finish``; with
    ``key`` (``_sized_key``), kept for ``_resized`` where the engine can re-derive its figures at another
    concurrency (``Context.load``); with ``stage``, one device of that pipeline stage of ``w.pipeline_parallel``
    (pipeline.py: its weights, eq. PP1, and its layers' share of the KV cache)."""
    acc = Acc()
    profile = E.serving_profile(str(w.engine), w.device, w.gpu_runtime, w.gpu_capability)  # SGLang's DSA row by GPU
    acc.assumptions.append(Assumption("engine", w.engine, "engine" not in (w.given or ()), profile.description))
    given = w.given or ()
    # every input that sizes the KV cache and activations is named: given (as given) or the default
    at = len(acc.assumptions) + 1  # where the concurrency's assumption goes (after the context's)
    for name, why in _SIZING_WHY:
        _sizing_assumption(acc, w, name, why)
    if w.tensor_parallel > 1 or "tensor_parallel" in given:  # the devices the weights and KV heads are split over
        acc.assume("tensor_parallel", 1, w.tensor_parallel if "tensor_parallel" in given else None,
                   "one device per replica (InferenceWorkload's default)")
    if w.pipeline_parallel > 1 or "pipeline_parallel" in given:  # the stages the decoder layers are split over
        acc.assume("pipeline_parallel", 1, w.pipeline_parallel if "pipeline_parallel" in given else None,
                   "one pipeline stage per replica (InferenceWorkload's default)")
    w = _data_parallel_rank(spec, w, acc)  # one data-parallel rank's sequences (eq. EP3)
    media = media_in_context(spec, w, acc)
    w = _with_media(w, media)
    acc.assumptions.extend(model_note_assumptions(spec))  # config values the model reader defaulted or derived
    acc.assumptions.extend(mtp_assumptions(spec, training=False))  # stored MTP layers: not loaded (formulas/mtp.py)
    acc.warnings.extend(model_warnings(spec, training=False, engine=str(w.engine)))
    fmt, group = _resolve_weights(spec, w, acc)
    refuse_serving(spec, str(w.engine), fmt, w.tensor_parallel, media is not None)
    dtype = _compute_dtype(spec, w, fmt, acc)
    act_bytes = DTYPE_BYTES[dtype]
    fused = serving_fused_experts(spec, str(w.engine), fmt)
    served = serving_weight_spec(spec, str(w.engine), fmt)  # vLLM, SGLang: k/v of Gemma's KV-sharing layers too
    kv_shared_note = kv_shared_weights_assumption(spec, served, str(w.engine))
    if kv_shared_note is not None:
        acc.assumptions.append(kv_shared_note)
    capability = _router_capability(spec, w, fmt, acc)  # vLLM's fp32 router gate off Hopper / Blackwell
    wb = weight_bytes(served, fmt, group, act_bytes, fused, str(w.engine), capability)  # "file": the file's bytes
    wb, stored_head = resident_file_weights(spec, wb, str(w.engine))  # a tied model's stored lm_head: not kept
    if stored_head is not None:
        acc.assumptions.append(stored_head)
    if fused:  # transformers leaves the fused experts and router in the compute dtype (formats.serving_fused_experts)
        acc.assumptions.append(Assumption("fused_experts", dtype, True, FUSED_EXPERTS_WHY))
    expert_tp, ep = moe_split(w.tensor_parallel, w.data_parallel, w.expert_parallel)  # eq. EP1
    uneven = uneven_experts_refusal(spec.moe.num_experts if spec.moe else 1, ep, str(w.engine))  # SGLang loads E % ep == 0 only (eq. EP2)
    if uneven is not None:
        raise FieldError("data_parallel", uneven, also=("expert_parallel", "tensor_parallel"))
    if w.tensor_parallel == 1 and expert_tp > 1:  # experts split by DP x TP alone (eqs. TP6, TP5)
        block_refusal = width_refusal(spec, 1, str(w.engine), expert_tp) or (
            quant_block_refusal(spec, 1, str(w.engine), fmt, group, expert_tp) if fmt in QUANT_SHARD_FORMATS else None)
        if block_refusal is not None:
            raise FieldError("data_parallel", block_refusal, also=("expert_parallel",))
    if w.tensor_parallel == 1:  # vLLM's and SGLang's block checks at TP 1 too (eq. TP5)
        one_refusal = every_degree_refusal(spec, str(w.engine), fmt, group)
        if one_refusal is not None:  # the format loads at no degree: the weights' field, each face its own names
            raise FieldError("weights", one_refusal, also=("tensor_parallel",))
    if w.tensor_parallel > 1:
        check_tensor_parallel(spec, w.tensor_parallel)
        groups_refusal = mamba2_layout_refusal(spec, w.tensor_parallel, str(w.engine))
        if groups_refusal is not None:
            raise FieldError("tensor_parallel", groups_refusal)
        kv_refusal = serving_tensor_parallel_refusal(spec, w.tensor_parallel, str(w.engine), fmt, group, expert_tp)
        if kv_refusal is not None:  # a field error, so each face names its own flag / key (--tp, --pp; web "tp")
            raise FieldError("tensor_parallel", kv_refusal,
                             also=tuple(f for f in ("pipeline_parallel", "expert_parallel", "data_parallel") if f in kv_refusal))
        plan_refusal = transformers_tensor_parallel_refusal(spec) if w.engine == "transformers" else None
        if plan_refusal is not None:
            raise FieldError("tensor_parallel", plan_refusal, also=("engine",))
        if w.engine == "llamacpp":
            raise FieldError("tensor_parallel", "tensor_parallel applies to vLLM, SGLang and transformers: llama.cpp "
                             "splits layers (or rows) over the GPUs of one machine rather than tensor-parallel shards, "
                             "the machines replicas (specs/training.py llamacpp_split_gpus); use gpus N, one "
                             "machine's, with split_mode layer|row", also=("gpus", "split_mode"))
        wb = shard_weights(served, wb, w.tensor_parallel, act_bytes, str(w.engine), group, fused,
                           capability=capability)
        if stage is None:
            acc.warnings.append(f"memory is per device, for each of {w.tensor_parallel} tensor-parallel devices")
    if expert_tp * ep > w.tensor_parallel:  # the routed experts split over the data-parallel ranks too (eq. EP1)
        full = weight_bytes(served, fmt, group, act_bytes, fused, str(w.engine), capability)
        wb = expert_split_weights(wb, full.by_component.get("experts", 0), spec.moe.num_experts if spec.moe else 1,
                                  w.tensor_parallel, ep, expert_tp)
        acc.warnings.append(
            f"memory is per device, for each of {w.data_parallel * w.tensor_parallel} devices of "
            f"{w.data_parallel} data-parallel rank(s) x {w.tensor_parallel} tensor-parallel: "
            + (f"routed experts split over {ep} expert-parallel devices, ceil({spec.moe.num_experts if spec.moe else 0}"
               f" / {ep}) whole experts on the fullest" if ep > 1 else
               f"each routed expert tensor-parallel over {expert_tp} devices (vLLM flattens the MoE layer's "
               "tensor parallelism over the data-parallel ranks without --enable-expert-parallel)")
            + ("; attention and embedding weights tensor-parallel over each rank's devices, the dense MLP, "
               f"shared-expert and lm_head weights over all {w.data_parallel * w.tensor_parallel} (SGLang's attention "
               "DP, formulas/serving_expert_parallel.py eq. EP1s)" if w.engine == "sglang" else
               "; attention, dense and shared-expert weights on every rank (formulas/serving_expert_parallel.py "
               "eqs. EP1-EP2)") + "; the all-to-all buffers are not modelled")
    if w.engine == "sglang" and w.data_parallel > 1:  # the FFN and lm_head over the whole TP group (eq. EP1s)
        group_tp = w.data_parallel * w.tensor_parallel
        ffn_refusal = width_refusal(spec, group_tp, str(w.engine), expert_tp, SGLANG_LAYER_COMPONENTS) or (
            quant_block_refusal(spec, group_tp, str(w.engine), fmt, group, expert_tp,
                                components=SGLANG_LAYER_COMPONENTS) if fmt in QUANT_SHARD_FORMATS else None)
        if ffn_refusal is not None:
            raise FieldError("data_parallel", f"SGLang's attention DP splits the dense MLPs and shared experts over "
                             f"all {group_tp} devices of its TP group (formulas/serving_expert_parallel.py eq. EP1s): "
                             + ffn_refusal, also=("tensor_parallel",))
        whole = resident_file_weights(spec, weight_bytes(served, fmt, group, act_bytes, fused, str(w.engine),
                                                         capability), str(w.engine))[0]
        wb = full_group_weights(wb, shard_weights(served, whole, w.data_parallel * w.tensor_parallel, act_bytes,
                                                  str(w.engine), group, fused, capability=capability),
                                w.data_parallel, w.tensor_parallel)
    kv_share = 1.0
    if stage is not None:
        from .pipeline import kv_stage_share, stage_weights
        wb = stage_weights(spec, wb, w, stage, act_bytes)
        kv_share = kv_stage_share(spec, w, stage)
    kvd = _kv_dtype(w, profile, dtype, acc, spec)
    window = engine_window(spec, str(w.engine))
    refusal = _window_notes(spec, w, window, acc)
    if spec.recurrent_layer_count:
        # transformers' prefill of a Mamba-2 / Gated DeltaNet / Mamba-1 mixer has its own peak
        # (formulas/recurrent_activations.py eqs. M4, G4, M5, taken in hf_transformers.py), and so has vLLM's profile
        # run, which skips the chunked scans (formulas/vllm_mixer_profile.py eqs. V1-V3, taken in vllm.py); elsewhere
        # the attention-layer rule stands in for it
        scan_rule = (w.engine == "transformers" and spec.recurrent is not None
                     and default_mamba_path(w.device, w.gpu_runtime) == "torch")  # (as training's mamba_path)
        profile_rule = w.engine == "vllm" and vllm_profile_mixer_modelled(spec)
        acc.warnings.append(f"{spec.recurrent_layer_count} of {spec.num_layers} layers are recurrent "
                            f"({spec.attention_kind}): their conv + SSM state is a fixed size per sequence "
                            "(recurrent_state), only the attention layers hold a KV cache"
                            + ("; vLLM's start-up profile run skips the mixers' chunked scans (no attention "
                               "metadata), so the KV pool is sized on their projections (formulas/"
                               "vllm_mixer_profile.py eqs. V1-V3); a full max_num_batched_tokens prefill's scan "
                               "buffers are not profiled and come out of the (1 - gpu_memory_utilization) margin"
                               if profile_rule else "")
                            + ("" if scan_rule or profile_rule else "; the activation peak of the recurrent mixers' "
                               "chunked scan is approximated by the attention-layer rule"
                               + (" (on a CUDA GPU the mixers' kernels, mamba_ssm / causal-conv1d / fla, are taken "
                                  "as installed, training's mamba_path default; their peak is not derived)"
                                  if w.engine == "transformers" and w.device != "cpu" and w.gpu_runtime == "cuda"
                                  else "")))
        if scan_rule:
            acc.assumptions.append(Assumption(
                "recurrent_scan_path", "torch", True,
                "transformers' torch reference scan (mamba2_chunk_scan / torch_chunk_gated_delta_rule / "
                "mamba_selective_scan's loop: mamba_ssm, causal-conv1d and fla not installed) sizes the recurrent "
                "mixers' prefill peak (eqs. M4, G4, M5); with those kernels the chunk (Mamba-1: discretised) tensors "
                "are never materialised and the peak is lower"))
        if w.engine == "sglang":
            acc.warnings.append("SGLang keeps the recurrent state in a separate per-request pool (MambaPool, "
                                "recurrent_state_pool) "
                                + ("of the max_mamba_cache_size given" if w.max_mamba_cache_size is not None
                                   else "of max_running_requests slots (the radix cache disabled)"
                                   if w.disable_radix_cache and w.max_num_seqs is not None
                                   else "split off the token pool by SGLang's mamba_full_memory_ratio")
                                + "; speculative decoding's intermediate states are not modelled")
    if spec.is_moe:
        acc.warnings.append("MoE: every expert must be resident in memory; only compute scales with active parameters")
    ctx = Context(spec=spec, w=w, wb=wb, fmt=fmt, kv_dtype=kvd, act_bytes=act_bytes, profile=profile, acc=acc,
                  dtype=dtype, media=media, group=group, kv_stage_share=kv_share,
                  last_stage=stage is None or stage == w.pipeline_parallel - 1)
    if media is not None:
        ctx.details.update(media.details)
    if window is not None:
        ctx.details["context_window"] = window_details(window)
    if refusal is not None and window is not None:  # the engine will not start: no memory makes it fit (_check_fit)
        ctx.details["engine_refusal"] = refusal
        ctx.details["engine_refusal_reason"] = refusal_reason(window, w.context)
    if w.engine == "vllm":
        from .vllm import compose_vllm
        compose_vllm(ctx)
    elif w.engine == "llamacpp":
        from .llamacpp import compose_llamacpp
        compose_llamacpp(ctx)
    elif w.engine == "sglang":
        from .sglang import compose_sglang
        compose_sglang(ctx)
    else:
        from .hf_transformers import compose_transformers
        compose_transformers(ctx)
    # the sequences run at once (common.py eq. R1, set by the engine's composition: min(concurrency, its cap, its
    # pool's room)); an engine without a cap runs every one; the rest of the concurrency wait in its queue
    if key is not None and ctx.load is not None:
        if len(_SIZED) >= _MEMO_SIZE:
            _SIZED.clear()
        try:
            _SIZED[key] = (spec, ctx, tuple(acc.items), tuple(acc.assumptions), tuple(acc.warnings),
                           dict(ctx.details), at)
        except TypeError:  # an unhashable value: not kept
            pass
    return ctx


def _finish(spec: ModelSpec, ctx: Context) -> Estimate:
    """The estimate of the engine's composition ``ctx`` (``_compose``, ``_resized``): the sequences run and queued,
    the metric, the details every surface reads and the verdict."""
    w, acc, fmt, wb, kvd, profile, act_bytes, group = (ctx.w, ctx.acc, ctx.fmt, ctx.wb, ctx.kv_dtype, ctx.profile,
                                                        ctx.act_bytes, ctx.group)
    ctx.details.setdefault("running_sequences", w.concurrency)
    cap = ctx.details.get("running_cap")
    running, queued = running_and_queued(w.concurrency, int(ctx.details["running_sequences"]))
    if cap is not None and queued:
        ctx.details["queued_sequences"] = queued
        # what memory is sized for: the sequences the engine would run with room for them, min(concurrency, cap)
        ctx.details["need_sequences"] = running_sequences(w, cap)
        room = ctx.details.get("max_concurrency_at_context")
        acc.assumptions.append(queue_assumption(ENGINE_NAMES[str(w.engine)], w.concurrency, running,
                                                str(ctx.details["running_cap_name"]), int(cap),
                                                w.max_num_seqs is None, None if room is None else int(room)))
    acc.assumptions.append(apply_metric(acc.items, w.metric, INFERENCE, pytorch=w.engine != "llamacpp",
                                        device="cpu" if w.device == "cpu" else w.gpu_runtime,
                                        kv_pool=w.engine in ("vllm", "sglang"), engine=str(w.engine),
                                        concat=ctx.kv_growth))
    pc = count_params(spec)
    details = ctx.details
    details.update({
        # the requests in flight the estimate was sized at (the running ones and the queued: eqs. R1-R2)
        "concurrency": w.concurrency,
        "params_total": pc.total, "params_active": pc.active, "weights_format": fmt,
        "weights_bytes": wb.total, "weights_by_storage": dict(wb.by_storage), "kv_dtype": kvd,
        "kv_bytes_per_token": kv_cache(spec, 1, 1, kvd, mla_mode=profile.mla_mode,
                                       indexer_cache=profile.dsa_indexer_cache,
                                       latent_cache=profile.dsa_latent_cache,
                                       repeated_kv=profile.caches_repeated_kv,
                                       **E.kv_layout(profile.name, kv_dtype_name(kvd), act_bytes)).bytes_per_token,
        "attention": spec.attention_kind,
        # read by the speed estimate (estimate/fit.py): which experts a decode step of MoE models reads
        "identical_sequences": w.identical_sequences,
    })
    if fmt in GROUPED:  # the group the weights were sized at, which the speed sizes the bytes it reads at (fit)
        details["group_size"] = group
    # the bytes per value of the tensors a quantized format leaves unquantized, as the weights were sized at: the
    # speed reads the bytes held (fit)
    details["other_bytes"] = act_bytes
    if spec.recurrent_layer_count:
        details.update({"recurrent_layers": spec.recurrent_layer_count, "attention_layers": spec.attention_layers,
                        "state_dtypes": list(state_dtypes(ctx))})
        # as the engine allocates it (vLLM: padded pages, set by its composition), else eq. (3) for one sequence
        details.setdefault("recurrent_state_bytes_per_sequence", state_of(ctx, 1).per_sequence_bytes)
    band_engine = {"transformers": R.TRANSFORMERS, "vllm": R.VLLM}.get(str(w.engine))
    if band_engine is not None and w.device != "cpu" and spec.encoder_decoder is None:  # no encoder-decoder rows
        calibrated = calibrated_need(acc.items, R.INFERENCE_MEMORY, band_engine)
        if calibrated is not None:
            details["calibrated_range"] = calibrated
    if ctx.kv_growth is not None and w.metric in ("reserved", "nvidia-smi"):
        growth = releasable_growth(acc.items)
        if any(growth):  # the DynamicCache's released segments: shown by the metric, not needed (_check_fit)
            details["kv_growth_releasable"] = list(growth)
    est = Estimate("inference", spec.name, tuple(acc.items), tuple(acc.assumptions), tuple(acc.warnings), details)
    if w.memory is not None:
        _check_fit(est, w, acc)
        est = Estimate("inference", spec.name, tuple(acc.items), tuple(acc.assumptions), tuple(acc.warnings), details)
    return est


def _sized_key(spec: ModelSpec, w: InferenceWorkload) -> tuple[Any, ...] | None:
    """``_SIZED``'s key of ``w``: every field but the concurrency (``_workload_key``'s, by value and type); None
    where no engine composition re-derives its figures at another concurrency (vLLM with a memory given:
    vllm.py ``vllm_at_concurrency``), nor with data-parallel ranks: a rank holds ceil(C / D) of them
    (``_data_parallel_rank``, eq. EP3), which the re-derivation does not apply, so a rate's climb on TP 2 x DP 4 read
    a pool of 70 sequences per rank against all 112 in flight (DOES NOT FIT at 15 requests/s where `--concurrency
    112` fits). (A key with an unhashable value finds nothing and is not kept.)"""
    if w.engine != "vllm" or w.memory is None or w.data_parallel > 1:
        return None
    vals = tuple(v for k, v in w.__dict__.items() if k != "concurrency")
    return (id(spec), vals, tuple(map(type, vals)))


def _resized(spec: ModelSpec, w: InferenceWorkload, key: tuple[Any, ...]) -> Context | None:
    """The composition of ``w`` from ``_SIZED``'s of the same workload at another concurrency (None where none is
    kept): its items, assumptions (the concurrency's named anew, ``_sizing_assumption``), warnings and details, with
    the figures that read the concurrency re-derived by the engine (vllm.py ``vllm_at_concurrency``). The rest of
    ``_compose`` reads no concurrency (the checks and refusals too, so a workload kept composed without raising)."""
    try:
        hit = _SIZED.get(key)
    except TypeError:  # an unhashable value: not kept (_compose)
        return None
    if hit is None or hit[0] is not spec:
        return None
    _, kept, items, assumptions, warnings, details, at = hit
    acc = Acc()
    acc.items.extend(items)
    acc.assumptions.extend(assumptions)
    acc.warnings.extend(warnings)
    named = Acc()
    _sizing_assumption(named, w, *_SIZING_WHY[1])
    acc.assumptions[at] = named.assumptions[0]
    ctx = dataclasses.replace(kept, w=_with_media(w, kept.media), acc=acc, details=dict(details))
    from .vllm import vllm_at_concurrency
    vllm_at_concurrency(ctx)
    return ctx


# ``_compose``'s vLLM compositions with a memory, by ``_sized_key``: (the spec, the composition, its items,
# assumptions, warnings and details, the index of the concurrency's assumption), for the concurrencies a rate's
# climb asks of one layout (cleared by ``clear_caches``)
_SIZED: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _window_notes(spec: ModelSpec, w: InferenceWorkload, window: Window | None, acc: Acc) -> str | None:
    """The model's window as the engine sees it (estimate/context_window.py), for ``w.context`` (prompt + output +
    image/video tokens): a pool engine (vLLM, SGLang) refuses a longer one, returned (and warned) as the refusal,
    unless ``w.allow_long_context`` (its override, named as an assumption, with a warning); llama.cpp and
    transformers warn only."""
    if window is None:
        note = unchecked_warning(spec, str(w.engine), w.context)
        if note is not None:
            acc.warnings.append(note)
        return None
    if w.context <= window.tokens:
        return None
    if w.allow_long_context:
        acc.assumptions.append(Assumption("allow_long_context", True, False, f"{window.override}: "
                                          f"{ENGINE_NAMES[window.engine]} starts past the model's window "
                                          f"({window.check})"))
        acc.warnings.append(window_allowed(window, w.context))
        return None
    refusal = window_refusal(window, w.context)
    acc.warnings.append(refusal)
    return refusal


def _pool_admits(est: Estimate) -> int:
    """Sequences of the context a pool engine's pool holds (vLLM's KV blocks, SGLang's token pool). One rule for
    both engines: the verdict is whether the pool holds the sequences the engine runs at once (``_to_run``)."""
    return int(est.details.get("max_concurrency_at_context", 0))


def _to_run(est: Estimate, w: InferenceWorkload) -> int:
    """The sequences a pool engine runs at once with room for them: min(concurrency, its cap) (common.py eq. R1
    without the pool's bound); the others wait in its queue, which is no reason not to fit."""
    return int(est.details.get("need_sequences", running_sequences(w, est.details.get("running_cap"))))


def vllm_fits_at(est: Estimate, concurrency: int) -> bool | None:
    """The fit verdict (``_check_fit``'s vLLM branch) that the vLLM estimate ``est``, sized with a memory at any
    concurrency, would give at ``concurrency`` sequences: eq. (3), ``pool_admits(admitted, min(concurrency, cap))``,
    not fitting where there is no pool or the engine refuses the context. Every input but the concurrency reads none:
    the sequences the pool admits are (util x memory - weights - profiled activations - non-torch - CUDA graphs) //
    one sequence's KV at the context, the cap is max_num_seqs (vllm.py ``compose_vllm``), the missing pool and the
    context's refusal likewise. None where ``est`` has no pool count (no memory given): not derivable."""
    d = est.details
    admitted = d.get("max_concurrency_at_context")
    if admitted is None:
        return None
    if d.get("vllm_no_pool") or d.get("engine_refusal_reason") is not None:
        return False
    return pool_admits(int(admitted), running_and_queued(concurrency, d.get("running_cap"))[0])


def queue_assumption(engine: str, concurrency: int, running: int, cap_name: str, cap: int,
                     default: bool = True, room: int | None = None) -> Assumption:
    """The named assumption that the requests the engine does not run at once wait in its queue: ``running`` is
    common.py eq. R1, min(concurrency, its running cap, ``room``: the sequences of the context its pool holds, None
    where not known); ``default``: the cap is the engine's default, not one the user stated."""
    bounds = f"min({concurrency} requests, {cap_name} {cap}" + (f", KV pool room {room}" if room is not None else "")
    pool_bound = room is not None and running == room < min(concurrency, cap)
    why = (f"its KV pool holds {room} sequences of this context, fewer than {cap_name} {cap}, and a request whose KV "
           "blocks cannot be allocated stays in the waiting queue" if pool_bound
           else f"it runs at most {cap_name} = {cap} sequences at once")
    return Assumption("running_sequences", running, default,  # (a min of the others: marked derived)
                      f"derived: {engine} runs {running} sequences at once = {bounds}) (estimate/inference/common.py eq. R1): "
                      f"{why}; {running_and_queued(concurrency, running)[1]} of the {concurrency} requests wait in its queue (vLLM: "
                      "vllm/v1/core/sched/scheduler.py Scheduler.schedule takes no waiting request once "
                      "max_num_running_reqs run, and stops at the first whose allocate_slots returns None; SGLang: "
                      "python/sglang/srt/managers/scheduler.py get_new_batch_prefill takes none once "
                      "max_running_requests run, and its PrefillAdder only while the token pool has room); the wait is the fit's queue_wait_seconds "
                      "(formulas/serving_queue.py eqs. Q1-Q3 over the running ones)")


def _check_fit(est: Estimate, w: InferenceWorkload, acc: Acc, shown_growth: int | None = None) -> None:
    """The fit verdict (estimate/verdict.py): vLLM by the sequences its pool admits, the others by the expected
    need against memory less the margin ``margin_rule`` keeps: x (1 - headroom), or llama.cpp on a GPU - fit_target
    (its own --fit-target, the margin of fit --auto)."""
    mem = w.memory or 0
    if w.engine == "vllm":
        util = float(est.details.get("gpu_memory_utilization") or 1 - check_headroom(w.headroom))
        cuda = est.details.get("cuda_total_bytes")
        v = admission_verdict(_pool_admits(est), _to_run(est, w), w.context, est.total("device")[1], mem, util,
                              requested=w.concurrency,
                              pool_words=None if cuda is None else vllm_pool_words(int(cuda), util))
        no_pool = est.details.get("vllm_no_pool")
        if no_pool:  # no KV pool at all (vLLM does not start): say why and by how much, not "0 sequences"
            v = dataclasses.replace(v, fits=False, reason=str(no_pool), warnings=(f"does not fit: {no_pool}",))
    elif w.engine == "sglang":
        mfs = float(est.details.get("mem_fraction_static") or 0.0)
        # the pool whose room binds (sglang.py: the token pool, eq. 3, or the MambaPool's slots // s, eq. 4b)
        v = admission_verdict(_pool_admits(est), _to_run(est, w), w.context,
                              est.total("device")[1], mem, mfs, engine="SGLang", pool=binding_pool_words(est.details),
                              knob="mem_fraction_static", requested=w.concurrency,
                              bound=binding_pool(est.details),
                              # the base SGLang multiplies the share by (sglang.py 'pre'), not the device memory
                              pool_words=None if "free_before_load_bytes" not in est.details else sglang_pool_words(
                                  mfs, int(est.details["free_before_load_bytes"]),
                                  int(est.details["workload_budget_bytes"]), w.tensor_parallel))
        no_pool = est.details.get("sglang_too_small") or est.details.get("sglang_no_pool")
        if no_pool:  # no pool at all (SGLang does not start): say why, not "0 tokens at a fraction"
            v = dataclasses.replace(v, fits=False, reason=str(no_pool), warnings=(f"does not fit: {no_pool}",))
        elif est.details.get("max_running_requests") == 0 and "max_mamba_cache_size" in est.details and \
                est.details["max_mamba_cache_size"] // est.details["mamba_requests_ratio"] == 0:
            # a hybrid model's state pool too small for one running request (sglang.py eq. 4b): nothing runs
            why = (f"SGLang admits 0 sequence(s): max_running_requests = min(eq. 4, max_mamba_cache_size "
                   f"{est.details['max_mamba_cache_size']} // {est.details['mamba_requests_ratio']}) = 0 "
                   "(kv_cache_configurator.py:3135-3150); more memory or a smaller format")
            v = dataclasses.replace(v, fits=False, reason=why, warnings=(f"does not fit: {why}",))
    elif E.llamacpp_layer_split(w.engine, w.gpus) and w.device == "gpu":
        # a split: each GPU holds its own part, the verdict is the fullest GPU's (estimate/inference/llamacpp.py)
        margin = margin_rule(w.engine, w.device, w.headroom, w.fit_target)  # llama.cpp's own: --fit-target
        acc.assumptions.append(margin.assumption())
        gpus = [d for d in est.details["split"]["devices"] if d["device"] != "host"]
        worst = max(gpus, key=lambda d: d["total"])
        v = memory_verdict(worst["total"], max(d["total_high"] for d in gpus), mem, margin)
        v = dataclasses.replace(v, reason=v.reason.replace("per device", f"on the fullest GPU ({worst['device']})", 1)
                                + (f"; every GPU taken to have {format_bytes(mem)} ({E.ONE_MEMORY_SAID})" if mem else ""))
    else:
        margin = margin_rule(w.engine, w.device, w.headroom, w.fit_target)  # eq. (1), llama.cpp on a GPU eq. (1')
        acc.assumptions.append(margin.assumption())
        loc: Location = "host" if w.device == "cpu" else "device"
        _, mid, hi, calibrated = verdict_need_range(est, loc)  # less the segments the OOM retry releases
        released = releasable_at(est, loc)  # what verdict_need_range took off, for the reason
        v = memory_verdict(mid, hi, mem, margin, calibrated)
        if released and (released[1] if shown_growth is None else shown_growth):  # (review23b D4: not "0 B")
            capped = "" if shown_growth is None else (f" ({format_bytes(released[1])} before the cap at the device's "
                                                      "memory, allocator.py eq. G3)")
            v = dataclasses.replace(v, reason=v.reason + "; not counting the "
                                    f"{format_bytes(released[1] if shown_growth is None else shown_growth)} of "
                                    f"segments the DynamicCache's growth leaves cached{capped}, which a failing "
                                    f"allocation releases (metric {w.metric}: allocator.py eq. G2)")
    refusal = est.details.get("engine_refusal_reason")
    if refusal is not None:  # the engine will not start (warned already): whatever the memory, it does not fit
        v = dataclasses.replace(v, fits=False, reason=f"{refusal}; the memory alone: {v.reason}", warnings=())
    est.details.update(v.details())
    acc.warnings.extend(v.warnings)
    decimal = decimal_memory_note(w.memory)  # memory given in GB, not GiB
    if decimal is not None:
        acc.warnings.append(decimal)
