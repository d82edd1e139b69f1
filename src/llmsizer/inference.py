"""Inference memory: the composition layer. Unpacks specs, calls formulas, records every default.

    device memory = weights + KV cache + activation workspace + runtime overhead      (seed 000, "Estimation
    formula for inference resource usage"), with each term from ``formulas/`` and each engine's allocation
    rules from ``engines.py``. No arithmetic of its own beyond adding the terms.
"""

from __future__ import annotations

from typing import Any

from . import engines as E
from .errors import InputError
from .formulas.activations import prefill_activation_bytes
from .formulas.kv_cache import kv_cache, kv_dtype_bytes
from .formulas.params import count_params
from .formulas.weight_formats import (
    WeightBytes,
    file_weight_bytes,
    normalize_format,
    stored_format,
    weight_bytes,
)
from .result import Assumption, Estimate, Item
from .specs import InferenceWorkload, ModelSpec
from .units import format_bytes

_DTYPE_LABEL = {"fp32": 4, "fp16": 2, "bf16": 2}


class _Acc:
    """Collects items, assumptions and warnings while an estimate is composed."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.assumptions: list[Assumption] = []
        self.warnings: list[str] = []

    def assume(self, name: str, value: Any, given: Any, why: str) -> Any:
        """Use ``given`` when the user supplied it, else ``value``; record which."""
        if given is not None:
            self.assumptions.append(Assumption(name, given, False, "given"))
            return given
        self.assumptions.append(Assumption(name, value, True, why))
        return value

    def span(self, name: str, span: E.Span, location: str = "device", formula: str = "") -> None:
        self.items.append(Item(name, span.expected, location, span.low, span.high,  # type: ignore[arg-type]
                               formula or "named constant", span.source))


def _resolve_weights(spec: ModelSpec, w: InferenceWorkload, acc: _Acc) -> tuple[str, int]:
    if w.weights is None and spec.file_weights is not None:
        acc.assumptions.append(Assumption("weights", "file", True,
                                          f"exact tensor bytes read from {spec.file_weights.path}"))
        return "file", w.group_size
    if w.weights is None:
        fmt, group, why = stored_format(spec)
        acc.assumptions.append(Assumption("weights", fmt, True, f"checkpoint's stored format ({why})"))
    else:
        fmt, group = normalize_format(w.weights), w.group_size
        acc.assumptions.append(Assumption("weights", fmt, False, "given"))
    if w.engine == "llamacpp" and not fmt.startswith("gguf:"):
        if fmt in ("fp32", "fp16", "bf16"):
            fmt = "gguf:" + ("f32" if fmt == "fp32" else fmt.replace("fp", "f"))
            acc.warnings.append(f"llama.cpp runs GGUF files: weights taken as {fmt}")
        else:
            raise InputError(f"engine llamacpp runs GGUF formats (e.g. q4_k_m, q8_0), not {fmt!r}")
    if w.engine == "transformers" and fmt.startswith("gguf:"):
        acc.warnings.append("transformers dequantizes GGUF files on load; weights counted in bf16 instead of "
                            f"{fmt} (transformers docs 'GGUF and interaction with Transformers')")
        fmt = "bf16"
    if fmt in ("gptq-int4", "gptq-int8", "awq-int4"):
        acc.assumptions.append(Assumption("group_size", group, w.weights is None or w.group_size == 128,
                                          "quantization group size (GPTQ/AWQ default 128)"))
    return fmt, group


def _act_bytes(fmt: str, spec: ModelSpec) -> int:
    """Bytes per activation element: fp32 models compute in fp32, everything else in 16-bit."""
    return 4 if fmt in ("fp32", "gguf:f32") else 2


def _kv_dtype(spec: ModelSpec, w: InferenceWorkload, profile: E.EngineProfile, fmt: str, acc: _Acc) -> str:
    default = profile.kv_dtype_default
    if default == "model":
        default = "fp32" if _act_bytes(fmt, spec) == 4 else ("fp16" if (spec.torch_dtype or "") == "float16" else "bf16")
    kvd = acc.assume("kv_dtype", default, w.kv_dtype, f"{profile.name} default (KV cache in the activation dtype)")
    kv_dtype_bytes(kvd)  # validates
    if profile.name == "transformers" and kvd in ("fp8", "int8", "q8_0", "q4_0"):
        acc.warnings.append("transformers' default DynamicCache has no fp8/int8 storage; a QuantizedCache "
                            "(quanto/HQQ backends) is needed for that KV dtype")
    return kvd


def estimate_inference(model: ModelSpec | str, workload: InferenceWorkload | None = None, **kwargs: Any) -> Estimate:
    """Estimate the memory to serve ``model`` under ``workload`` (or keyword fields of InferenceWorkload).

    >>> est = estimate_inference("qwen2.5-0.5b", context=4096, concurrency=1)
    >>> est.total_bytes > 0
    True
    """
    if isinstance(model, str):
        from .models import load_model
        spec = load_model(model)
    else:
        spec = model
    w = workload if workload is not None else InferenceWorkload(**kwargs)
    if workload is not None and kwargs:
        raise InputError("give either a workload or keyword fields, not both")
    acc = _Acc()
    fmt, group = _resolve_weights(spec, w, acc)
    wb = file_weight_bytes(spec) if fmt == "file" else weight_bytes(spec, fmt, group)
    profile = E.PROFILES[w.engine]
    acc.assumptions.append(Assumption("engine", w.engine, w.engine == "transformers" and "engine" not in kwargs,
                                      profile.description))
    kvd = _kv_dtype(spec, w, profile, fmt, acc)
    if spec.max_position_embeddings and w.context > spec.max_position_embeddings:
        acc.warnings.append(f"context {w.context} exceeds the model's max_position_embeddings "
                            f"{spec.max_position_embeddings}")
    if spec.is_moe:
        acc.warnings.append("MoE: every expert must be resident in memory; only compute scales with active parameters")
    details: dict[str, Any] = {}
    if w.device == "cpu" and w.engine == "vllm":
        raise InputError("the vllm profile models GPU serving; use engine transformers or llamacpp for device cpu")
    if w.engine == "vllm":
        _vllm(spec, w, wb, kvd, acc, details)
    elif w.engine == "llamacpp":
        _llamacpp(spec, w, wb, kvd, acc, details)
    else:
        _transformers(spec, w, wb, kvd, acc, details)
    pc = count_params(spec)
    details.update({
        "params_total": pc.total, "params_active": pc.active, "weights_format": fmt,
        "weights_by_storage": dict(wb.by_storage), "kv_dtype": kvd,
        "kv_bytes_per_token": kv_cache(spec, 1, 1, kvd, mla_mode=profile.mla_mode).bytes_per_token,
        "attention": spec.attention_kind,
    })
    est = Estimate("inference", spec.name, tuple(acc.items), tuple(acc.assumptions), tuple(acc.warnings), details)
    if w.memory is not None:
        _check_fit(est, w, acc)
        est = Estimate("inference", spec.name, tuple(acc.items), tuple(acc.assumptions), tuple(acc.warnings), details)
    return est


def _check_fit(est: Estimate, w: InferenceWorkload, acc: _Acc) -> None:
    loc = "host" if w.device == "cpu" else "device"
    lo, mid, hi = est.total(loc)  # type: ignore[arg-type]
    mem = w.memory or 0
    est.details["memory_budget"] = mem
    est.details["fits"] = mid <= mem
    est.details["headroom_bytes"] = mem - mid
    if mid > mem:
        acc.warnings.append(f"does not fit: needs {format_bytes(mid)} (range {format_bytes(lo)}-{format_bytes(hi)}) "
                            f"but the budget is {format_bytes(mem)}")
    elif hi > mem:
        acc.warnings.append(f"fits at the expected {format_bytes(mid)} but not at the high end {format_bytes(hi)} "
                            f"of the range (budget {format_bytes(mem)})")


def _weights_item(wb: WeightBytes, location: str, nbytes: int | None = None, note: str = "") -> Item:
    parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in sorted(wb.by_storage.items(), key=lambda kv: -kv[1]))
    return Item("weights", wb.total if nbytes is None else nbytes, location,  # type: ignore[arg-type]
                formula=f"sum over tensors of format {wb.format} bytes ({parts}){note}",
                source="formulas/weight_formats.py (per-format rules and references)")


def _kv_item(spec: ModelSpec, tokens: int, seqs: int, kvd: str, profile: E.EngineProfile, location: str,
             block: int | None = None, window_extra: int | None = None) -> Item:
    kv = kv_cache(spec, tokens, seqs, kvd, mla_mode=profile.mla_mode,
                  window_extra=profile.window_extra if window_extra is None else window_extra, block_size=block)
    layers = f"{kv.full_layers} full layers x {kv.tokens_full} tokens"
    if kv.sliding_layers:
        layers += f" + {kv.sliding_layers} sliding layers x {kv.tokens_sliding} tokens"
    per = "(kv_lora_rank + qk_rope_head_dim)" if spec.mla is not None and profile.mla_mode == "latent" else \
        ("expanded MLA K+V" if spec.mla is not None else f"2 x {spec.num_kv_heads} kv_heads x {spec.head_dim} head_dim")
    return Item("kv_cache", kv.total_bytes, location,  # type: ignore[arg-type]
                formula=f"({layers}) x {per} x {kv_dtype_bytes(kvd)} B ({kvd}) x {seqs} sequences",
                source="formulas/kv_cache.py eqs. (1)-(2): Pope et al. 2022; DeepSeek-V2 eq. 10-11")


def _transformers(spec: ModelSpec, w: InferenceWorkload, wb: WeightBytes, kvd: str, acc: _Acc,
                  details: dict[str, Any]) -> None:
    loc = "host" if w.device == "cpu" else "device"
    out = acc.assume("output_tokens", 0, w.output_tokens,
                     "not given: the whole context is taken as the prompt (the largest prefill)")
    prompt = w.context - out
    act_b = _act_bytes(wb.format, spec)
    attention = acc.assume("attention", "sdpa", None if w.attention == "sdpa" else w.attention,
                           "transformers default attn_implementation (no score matrix kept)")
    pre = prefill_activation_bytes(spec, w.concurrency, max(prompt, 1), max(prompt, 1), act_b, attention)
    dec = prefill_activation_bytes(spec, w.concurrency, 1, w.context, act_b, attention)
    prof = E.TRANSFORMERS
    kv_prompt = _kv_item(spec, prompt, w.concurrency, kvd, prof, loc)
    kv_end = _kv_item(spec, w.context, w.concurrency, kvd, prof, loc)
    phase_prefill = kv_prompt.bytes + pre.peak_bytes
    phase_decode = kv_end.bytes + dec.peak_bytes
    if phase_prefill >= phase_decode:
        kv, act, phase = kv_prompt, pre, f"end of prefill ({prompt} prompt tokens)"
    else:
        kv, act, phase = kv_end, dec, f"end of decoding ({w.context} tokens)"
    details["peak_phase"] = phase
    acc.items.append(_weights_item(wb, loc))
    acc.items.append(kv)
    acc.items.append(Item(
        "activations", act.peak_bytes, loc, low=act.peak_bytes, high=act.peak_bytes + act.logits_bytes,  # type: ignore[arg-type]
        formula=f"residual {format_bytes(act.residual_bytes)} + max(attention {format_bytes(act.attention_bytes)}, "
                f"mlp {format_bytes(act.mlp_bytes)}, logits {format_bytes(act.logits_bytes)}) at {phase}",
        source="formulas/activations.py (transformers modeling_llama.py LlamaMLP / eager_attention_forward)"))
    if loc == "device":
        acc.span("cuda_context", E.CUDA_CONTEXT)
        acc.items.append(Item("allocator_cache", 0, "device", low=0, high=act.peak_bytes,
                              formula="reserved - allocated: 0 expected, up to one more activation peak cached",
                              source="PyTorch CUDA caching allocator keeps freed blocks (docs 'CUDA semantics: memory management')"))
        acc.span("host_runtime", E.TORCH_HOST_RUNTIME, "host")
    else:
        acc.span("host_runtime", E.TORCH_HOST_RUNTIME, "host")


def _vllm(spec: ModelSpec, w: InferenceWorkload, wb: WeightBytes, kvd: str, acc: _Acc,
          details: dict[str, Any]) -> None:
    util = acc.assume("gpu_memory_utilization", E.VLLM_GPU_MEMORY_UTILIZATION, w.gpu_memory_utilization,
                      "vLLM default")
    mnbt = acc.assume("max_num_batched_tokens", E.VLLM_MAX_NUM_BATCHED_TOKENS, w.max_num_batched_tokens,
                      "vLLM V1 default token budget per step (the profile run's batch)")
    mns = acc.assume("max_num_seqs", E.VLLM_MAX_NUM_SEQS, w.max_num_seqs, "vLLM default")
    block = acc.assume("block_size", 16, w.paged_block_size, "vLLM default KV block (tokens)")
    act_b = _act_bytes(wb.format, spec)
    prof = prefill_activation_bytes(spec, 1, mnbt, mnbt, act_b, "flash", logits_positions=1)
    logits = mns * spec.vocab_size * (act_b + 4)
    act_peak = prof.residual_bytes + max(prof.attention_bytes, prof.mlp_bytes) + logits
    acc.items.append(_weights_item(wb, "device"))
    acc.items.append(Item("activations", act_peak, "device",
                          formula=f"profile run of {mnbt} tokens: residual + max(attention, mlp) + sampler logits "
                                  f"{mns} seqs x vocab x {act_b + 4} B",
                          source="formulas/activations.py; vLLM gpu_worker.determine_available_memory (profile_run)"))
    acc.span("cuda_context", E.CUDA_CONTEXT, formula="non-torch memory (CUDA context, cuBLAS)")
    acc.span("cuda_graphs", E.VLLM_CUDA_GRAPHS)
    need = _kv_item(spec, w.context, w.concurrency, kvd, E.VLLM, "device", block=block)
    fixed = wb.total + act_peak + E.CUDA_CONTEXT.expected + E.VLLM_CUDA_GRAPHS.expected
    one_seq = kv_cache(spec, w.context, 1, kvd, mla_mode="latent", window_extra=-1, block_size=block).total_bytes
    details["kv_needed_bytes"] = need.bytes
    details["kv_bytes_per_sequence"] = one_seq
    if w.memory is None:
        acc.items.append(need)
        details["memory_needed_at_utilization"] = int((fixed + need.bytes) / util)
        acc.warnings.append(f"vLLM pre-allocates KV to fill {util:.0%} of GPU memory: give --memory to see what it "
                            f"admits; this workload needs a GPU of at least "
                            f"{format_bytes((fixed + need.bytes) / util)} at that utilization")
        return
    budget = int(util * w.memory)
    kv_avail = budget - fixed
    per_block = kv_cache(spec, block, 1, kvd, mla_mode="latent", block_size=block).bytes_per_token * block
    blocks = max(kv_avail, 0) // max(int(per_block), 1)
    admitted = max(kv_avail, 0) // one_seq if one_seq else 0
    details.update({"kv_budget_bytes": kv_avail, "kv_blocks": int(blocks),
                    "max_concurrency_at_context": int(admitted),
                    "admitted_sequences": int(min(admitted, mns))})
    acc.items.append(Item("kv_cache", max(kv_avail, 0), "device",
                          formula=f"{util} x {format_bytes(w.memory)} - weights - activations - cuda_context - "
                                  f"cuda_graphs = {int(blocks)} blocks of {block} tokens",
                          source="vLLM pre-allocates all remaining memory to KV blocks (gpu_worker.determine_available_memory)"))
    if kv_avail < 0:
        acc.warnings.append("vLLM would fail at start-up: weights + activations + overhead exceed "
                            f"{util:.0%} of {format_bytes(w.memory)} (no memory left for KV cache)")
    elif admitted < w.concurrency:
        acc.warnings.append(f"vLLM admits only {int(admitted)} sequences of {w.context} tokens at once "
                            f"(asked {w.concurrency}); the rest wait in the queue")
    if mns < w.concurrency:
        acc.warnings.append(f"max_num_seqs {mns} caps concurrency below the {w.concurrency} requested")


def _llamacpp(spec: ModelSpec, w: InferenceWorkload, wb: WeightBytes, kvd: str, acc: _Acc,
              details: dict[str, Any]) -> None:
    n = spec.num_layers
    on_gpu = w.device == "gpu"
    ngl = acc.assume("n_gpu_layers", n + 1 if on_gpu else 0, w.n_gpu_layers if on_gpu else None,
                     "all layers and the output layer offloaded" if on_gpu else "CPU only")
    ngl = min(ngl, n + 1) if on_gpu else 0
    ubatch = acc.assume("n_ubatch", E.LLAMACPP_N_UBATCH, w.n_ubatch, "llama.cpp default physical batch")
    first_gpu = n - min(ngl, n)
    out_on_gpu = ngl > n
    gpu_w = sum(wb.layer_bytes[first_gpu:])
    # output layer = lm_head + the final norm (F32); a tied model gets a duplicate of token_embd on the
    # device (llama.cpp src/llama-model.cpp creates `output` from token_embd with TENSOR_DUPLICATED)
    out_matrix = wb.by_component.get("embedding" if spec.tie_word_embeddings else "lm_head", 0)
    out_bytes = out_matrix + 4 * spec.hidden_size
    embd_bytes = wb.by_component.get("embedding", 0)
    if out_on_gpu:
        gpu_w += out_bytes
    host_w = wb.total - gpu_w
    if on_gpu:
        acc.items.append(_weights_item(wb, "device", gpu_w, f"; {min(ngl, n)}/{n} layers offloaded"
                                       + (" + output layer" if out_on_gpu else "")))
        acc.items.append(Item("weights_host", host_w, "host",
                              formula=f"token embeddings {format_bytes(embd_bytes)} + layers kept on the CPU",
                              source="llama.cpp src/llama-model.cpp: the input layer always stays in host memory"))
    else:
        acc.items.append(_weights_item(wb, "host"))
    n_ctx = w.context * w.concurrency
    details["n_ctx"] = n_ctx
    # unified KV cache of n_ctx cells; SWA layers hold n_swa per sequence + one ubatch (llama-kv-cache-iswa.cpp)
    kv_all = kv_cache(spec, n_ctx, 1, kvd, mla_mode="latent",
                      window_extra=(spec.sliding_window or 0) * (w.concurrency - 1) + ubatch)
    kv_gpu = int(kv_all.total_bytes * (min(ngl, n) / n)) if on_gpu else 0
    formula_kv = _kv_item(spec, n_ctx, 1, kvd, E.LLAMACPP, "device",
                          window_extra=(spec.sliding_window or 0) * (w.concurrency - 1) + ubatch).formula
    if on_gpu:
        acc.items.append(Item("kv_cache", kv_gpu, "device", formula=formula_kv + " (offloaded layers)",
                              source="llama.cpp src/llama-kv-cache.cpp (f16 K and V per layer and cell)"))
        if kv_all.total_bytes - kv_gpu:
            acc.items.append(Item("kv_cache_host", kv_all.total_bytes - kv_gpu, "host", formula="layers on the CPU"))
    else:
        acc.items.append(Item("kv_cache", kv_all.total_bytes, "host", formula=formula_kv,
                              source="llama.cpp src/llama-kv-cache.cpp"))
    # compute buffer: f32 activations of one ubatch; with flash attention no score matrix; logits for the ubatch
    pre = prefill_activation_bytes(spec, 1, ubatch, n_ctx, 4, "flash", logits_positions=ubatch,
                                   logits_bytes_per_elem=0)
    acc.items.append(Item("compute_buffer", pre.peak_bytes, "device" if on_gpu else "host",
                          low=pre.peak_bytes // 2, high=pre.peak_bytes * 2,
                          formula=f"f32 graph of one ubatch ({ubatch} tokens): residual + max(attention, mlp, "
                                  f"logits {ubatch} x vocab)",
                          source="formulas/activations.py applied to llama.cpp's ggml graph (f32 intermediates)"))
    if on_gpu:
        acc.span("cuda_context", E.CUDA_CONTEXT)
    acc.span("host_runtime", E.LLAMACPP_HOST_RUNTIME, "host")
