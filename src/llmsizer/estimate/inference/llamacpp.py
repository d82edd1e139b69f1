"""Engine profile 'llamacpp': GGUF weights split between host and device by -ngl, a KV cache per sequence or unified.

Rules (llama.cpp ``src/llama-model.cpp``, ``src/llama-kv-cache.cpp``, ``src/llama-kv-cache-iswa.cpp``,
``src/llama-context.cpp``): token embeddings always stay in host memory; ``-ngl N`` offloads the last N of the
n_layer + 1 layers, the output layer counting as the last, so it is offloaded first (a tied model gets a device
copy of token_embd, ``TENSOR_DUPLICATED``); several GPUs share the offloaded layers by ``--tensor-split`` (layer
split) or each matrix by rows (row split), and ``--n-cpu-moe`` keeps expert tensors in host memory -- the
placement rules and their source lines are in ``llamacpp_split.py``; the KV cache holds n_ctx cells for all
sequences (f16 K and V by default) on each layer's device, in one stream per sequence or one unified stream
(-kvu), a sliding-window layer pad256(min(n_ctx_seq, n_swa x (unified ? n_seq : 1) + n_ubatch)) cells per
stream (``engines.llamacpp_kv_cells``, the rule the speed estimate reads too); the compute buffer is reserved
for one ubatch with a full cache, in f32, on each device that computes layers.
"""

from __future__ import annotations

from typing import Any

from ...errors import FieldError, InputError
from ...formulas.activations import prefill_activation_bytes
from ...formulas.kv_cache import kv_cache
from ...result import DEVICES_SUMMED, Assumption, Item
from ...specs.training import tensor_split_refusal
from ...units import format_bytes
from .. import engines as E
from ..allocator import NATIVE, context_span, device_context
from .common import Context, kv_item, state_item, weights_item
from .llamacpp_split import DevicePart, LayerCosts, per_layer_kv, place, split_points

MMPROJ_ON_GPU_WHY = ("llama.cpp loads the vision tower (mmproj) on the first GPU: mmproj_use_gpu = true "
                     "(common/common.h:596), clip.cpp:188-198 ggml_backend_init_by_type(GPU) = the first GPU device "
                     "(ggml-backend-reg.cpp:355-363); --no-mmproj-offload keeps it in host memory (not modelled) "
                     "(llama.cpp@0c1e57098)")


def compose_llamacpp(ctx: Context) -> None:
    spec, w, acc, wb = ctx.spec, ctx.w, ctx.acc, ctx.wb
    n = spec.num_layers
    on_gpu = w.device == "gpu"
    gpus = w.gpus if on_gpu else 0
    ngl = acc.assume("n_gpu_layers", n + 1 if on_gpu else 0, w.n_gpu_layers if on_gpu else None,
                     "all layers and the output layer offloaded" if on_gpu else "CPU only")
    ngl = min(ngl, n + 1) if on_gpu else 0
    ubatch = acc.assume("n_ubatch", E.LLAMACPP_N_UBATCH, w.n_ubatch, "llama.cpp default physical batch")
    ctx.details["n_ubatch"] = ubatch  # the speed estimate's prefill columns and sliding-layer cells (estimate/fit.py)
    mode, shares = _split_settings(ctx, gpus)
    n_cpu_moe = _n_cpu_moe(ctx)
    out_matrix = wb.by_component.get("embedding" if spec.tie_word_embeddings else "lm_head", 0)
    out_other = 4 * spec.hidden_size  # final norm (F32)
    # the input layer's lookup tables stay in host memory (token_embd; Gemma 3n's per_layer_token_embd, also
    # LLM_TENSOR_LAYER_INPUT in llama.cpp src/llama-arch.cpp)
    emb = wb.by_component.get("embedding", 0) + wb.by_component.get("per_layer_embedding", 0)
    # rope_freqs / rope_factors: one copy per device holding layers (llamacpp_split.py rule 3b), not host-only
    per_layer = spec.file_weights.per_layer_device_bytes if wb.format == "file" and spec.file_weights else 0
    # the multimodal towers (mmproj) on the first GPU by default (llamacpp_split.py rule (8)), named as an assumption
    mmproj = wb.by_component.get("vision", 0) if on_gpu else 0
    if mmproj:
        acc.assumptions.append(Assumption("mmproj_device", "GPU0", True, MMPROJ_ON_GPU_WHY))
    other_host = max(wb.total - sum(wb.layer_bytes) - emb - (0 if spec.tie_word_embeddings else out_matrix)
                     - out_other - per_layer - mmproj, 0)
    unified = bool(acc.assume("kv_unified", E.LLAMACPP_KV_UNIFIED, w.kv_unified, E.LLAMACPP_KV_UNIFIED_SOURCE))
    ctx.details["kv_unified"] = unified  # the speed estimate reads the same cells (estimate/fit.py)
    cells = E.llamacpp_kv_cells(spec.model_type, spec.sliding_window, ubatch, w.concurrency, w.context, unified)
    n_ctx = cells.n_ctx
    ctx.details["n_ctx"] = n_ctx
    ctx.details["kv_cells"] = {"streams": cells.streams, "cells_per_stream": cells.cells,
                               "sliding_cells_per_stream": cells.sliding_cells if spec.sliding_window else None}
    swa_extra = cells.window_extra
    if spec.model_type == "phi3" and spec.sliding_window:
        acc.warnings.append("llama.cpp runs Phi-3 without its sliding window: the KV cache holds the full context")
    kvc = kv_cache(spec, cells.stream_tokens(), cells.streams, ctx.kv_dtype, mla_mode="latent",
                   window_extra=swa_extra)
    # per attention layer and stream; layers without attention (hybrid models' Mamba / Gated DeltaNet / MLP-only)
    # and layers reusing an earlier layer's K/V (Gemma 3n; llama.cpp hparams.has_kv) hold no KV
    per_token_layer = cells.streams * kvc.bytes_per_token / spec.kv_cache_layers if spec.kv_cache_layers else 0.0
    if spec.full_head_dim:  # Gemma 4: a full-attention layer's cells are wider than a sliding layer's
        rates = {"full": cells.streams * kvc.layer_bytes_per_token_full,
                 "sliding": cells.streams * kvc.layer_bytes_per_token_sliding}
    else:
        rates = {"full": per_token_layer, "sliding": per_token_layer}
    kv_layers = per_layer_kv(kvc.total_bytes, [0.0 if k == "none" else rates[k] * (
        kvc.tokens_sliding if k == "sliding" else kvc.tokens_full) for k in spec.kv_cache_layer_types])
    graph = prefill_activation_bytes(spec, 1, min(ubatch, n_ctx), n_ctx, 4, "flash", logits_positions=ubatch,
                                     logits_bytes_per_elem=0)
    layer_graph = graph.residual_bytes + max(graph.attention_bytes, graph.mlp_bytes)
    zeros = (0,) * n
    costs = LayerCosts(wb.layer_bytes or zeros, wb.layer_expert_bytes or zeros, wb.layer_matrix_bytes or zeros,
                       kv_layers, out_matrix, out_other, emb, other_host, spec.tie_word_embeddings, layer_graph,
                       graph.peak_bytes, per_layer, mmproj)
    parts = place(costs, gpus, ngl, split_points(shares) if gpus else [], split_mode=mode, row_shares=shares,
                  n_cpu_moe=n_cpu_moe)
    gpu_parts, host = parts[:-1], parts[-1]
    layers_on = sum(1 for d in gpu_parts for _ in d.layers)
    out_on_gpu = any(p.output for p in gpu_parts)
    if on_gpu:
        # the tensors' sum is the whole file's; what the GPUs hold is it less the host's part (weights_host), plus the
        # tensors the GPUs hold a copy of as well (the output layer's copy of tied token embeddings, rule 3b's tables)
        on_devices = sum(p.weights for p in gpu_parts)
        also = on_devices - (wb.total - host.weights)
        note = (f" = {format_bytes(wb.total)}, less {format_bytes(host.weights)} kept in host memory (weights_host)"
                + (f", plus {format_bytes(also)} the GPUs hold a copy of as well ("
                   + ("the output layer's copy of the tied token embeddings" if spec.tie_word_embeddings else
                      "the tensors each GPU holding layers keeps its own copy of") + ")" if also > 0 else ""))
        note += f"; {layers_on}/{n} layers offloaded" + (" + output layer" if out_on_gpu else "")
        if n_cpu_moe:
            note += f"; experts of layers 0-{n_cpu_moe - 1} in host memory (--n-cpu-moe {n_cpu_moe})"
        if mmproj:
            note += f"; vision tower (mmproj) {format_bytes(mmproj)} on GPU0"
        acc.items.append(weights_item(wb, "device", on_devices, note + _per_gpu(gpu_parts, "weights")))
        acc.items.append(Item("weights_host", host.weights, "host",
                              formula=f"token embeddings {format_bytes(emb)}"
                                      + (f" + {n - layers_on} of {n} layers kept on the CPU" if layers_on < n else "")
                                      + (f" + other tensors {format_bytes(other_host)}" if other_host else "")
                                      + (" + offloaded experts" if n_cpu_moe else ""),
                              source="llama.cpp src/llama-model.cpp:1603-1605: the input layer stays in host memory"))
    else:
        acc.items.append(weights_item(wb, "host"))
    kv = kv_item(ctx, cells.stream_tokens(), cells.streams, "device" if on_gpu else "host", window_extra=swa_extra,
                 seqs_label="unified stream" if unified else "streams (one per sequence)")
    if on_gpu and spec.kv_cache_layers:
        kv_dev = sum(p.kv for p in gpu_parts)
        acc.items.append(Item("kv_cache", kv_dev, "device", formula=kv.formula + f" x {layers_on}/{n} layers"
                              + _per_gpu(gpu_parts, "kv"), source=kv.source))
        if host.kv:
            acc.items.append(Item("kv_cache_host", host.kv, "host", formula="KV of the layers on the CPU"))
    elif spec.kv_cache_layers:
        acc.items.append(kv)
    state_by_part: dict[str, int] = {}
    if spec.recurrent_layer_count:
        state_by_part = _state_items(ctx, gpu_parts if on_gpu else [])
    how = (f"f32 graph of one ubatch ({ubatch} tokens): residual + max(attention, mlp, logits {ubatch} x vocab)")
    src = ("formulas/activations.py applied to llama.cpp's f32 ggml graph (llama-context.cpp reserves it for "
           "n_ubatch tokens and a full cache, one buffer per backend)")
    if on_gpu:
        dev_c = sum(p.compute for p in gpu_parts)
        acc.items.append(Item("compute_buffer", dev_c, "device", low=dev_c // 2, high=dev_c * 2,
                              formula=how + _per_gpu(gpu_parts, "compute"), source=src))
        if host.compute:
            acc.items.append(Item("compute_buffer_host", host.compute, "host", low=host.compute // 2,
                                  high=host.compute * 2, formula="the same graph for the layers on the CPU",
                                  source=src))
        device_context(acc.items, acc.assumptions, ctx.w.gpu_runtime, gpus, phase=NATIVE)
        if gpus > 1:  # the device items above are sums over the GPUs (each GPU's part: details["split"])
            ctx.details[DEVICES_SUMMED] = gpus
    else:
        acc.items.append(Item("compute_buffer", graph.peak_bytes, "host", low=graph.peak_bytes // 2,
                              high=graph.peak_bytes * 2, formula=how, source=src))
    enc = ctx.media.encoder(spec, 1, 4, "flash") if ctx.media is not None else None
    if enc is not None:
        # mtmd encodes one image (tile) at a time on clip's own f32 graph, beside the text context's buffers
        # (tools/mtmd/mtmd.cpp mtmd_encode_chunk -> clip_image_batch_encode with one image)
        acc.items.append(Item("vision_compute_buffer", enc.peak_bytes, "device" if on_gpu else "host",
                              low=enc.peak_bytes // 2, high=enc.peak_bytes * 2,
                              formula="f32 graph of the vision encoder over one image: pixels + max(attention, mlp)",
                              source="formulas/vision_activations.py eqs. (1)-(4) applied to llama.cpp's clip graph "
                                     "(tools/mtmd/clip.cpp)"))
    acc.span("host_runtime", E.LLAMACPP_HOST_RUNTIME, "host")
    if on_gpu and (gpus > 1 or n_cpu_moe or w.split_mode or w.tensor_split or w.n_gpu_layers is not None):
        ctx.details["split"] = _split_details(parts, mode, shares, ngl, n_cpu_moe, ctx.w.gpu_runtime)
        ctx.details["split"]["embedding"] = emb
        for d in ctx.details["split"]["devices"]:  # each device's share of the recurrent state (0 without one)
            d["recurrent_state"] = state_by_part.get(d["device"], 0)
            d["recurrent_state_per_sequence"] = d["recurrent_state"] // max(w.concurrency, 1)
            d["total"] += d["recurrent_state"]
            d["total_high"] += d["recurrent_state"]
        if enc is not None:  # clip's compute buffer on the mmproj's device, GPU0 (llamacpp_split.py rule (8))
            gpu0 = ctx.details["split"]["devices"][0]
            gpu0["vision_compute_buffer"] = enc.peak_bytes
            gpu0["total"] += enc.peak_bytes
            gpu0["total_high"] += 2 * enc.peak_bytes


def _state_items(ctx: Context, gpu_parts: list[DevicePart]) -> dict[str, int]:
    """The recurrent state: one F32 row per sequence slot (n_seq_max = the concurrency) and recurrent layer, on the
    device of its layer (src/llama-memory-recurrent.cpp: ``model.dev_layer(i)`` when offloading). Returns each
    part's bytes. The placement of layers (llamacpp_split.place) does not weigh it: a few MiB per layer and
    sequence."""
    spec, acc = ctx.spec, ctx.acc
    st = state_item(ctx, ctx.w.concurrency, "device" if gpu_parts else "host")
    if not gpu_parts:
        acc.items.append(st)
        return {"host": st.bytes}
    per_layer = st.bytes / spec.recurrent_layer_count
    state_layers = per_layer_kv(st.bytes, [per_layer if r else 0.0 for r in spec.recurrent_layers])
    by_part = {p.name: sum(state_layers[i] for i in p.layers) for p in gpu_parts}
    dev_b = sum(by_part.values())
    by_part["host"] = st.bytes - dev_b
    rec_on = sum(1 for p in gpu_parts for i in p.layers if spec.recurrent_layers[i])
    acc.items.append(Item(st.name, dev_b, "device", formula=st.formula + f" x {rec_on}/{spec.recurrent_layer_count} "
                          "recurrent layers offloaded", source=st.source))
    if st.bytes - dev_b:
        acc.items.append(Item("recurrent_state_host", st.bytes - dev_b, "host",
                              formula="state of the recurrent layers on the CPU", source=st.source))
    return by_part


# -sm row asks every GPU llama.cpp uses for its backend's split buffer type, one GPU as well as several:
# llama_model::load_tensors calls make_gpu_buft_list(dev, split_mode, tensor_split) for each device whatever their
# number, and make_gpu_buft_list throws "device ... does not support split buffers" when split_mode is ROW and the
# backend exports no ggml_backend_split_buffer_type (src/llama-model.cpp:1140-1165 at llama.cpp@0c1e57098).
ROW_SPLIT_WARNING = ("-sm row needs a backend with split buffers: at llama.cpp@0c1e57098 SYCL and Hexagon; CUDA builds "
                     "of that commit refuse it (src/llama-model.cpp:1163), older ones accept it")


def _split_settings(ctx: Context, gpus: int) -> tuple[str, list[float]]:
    """(split mode, tensor-split shares) in force, recorded as assumptions when several GPUs are used."""
    w, acc = ctx.w, ctx.acc
    if gpus <= 1:
        if w.tensor_split is not None and len(w.tensor_split) > 1:
            raise FieldError("tensor_split", f"tensor_split gives {len(w.tensor_split)} shares for one GPU; set the "
                             "GPUs (--gpus/--count)")
        if gpus == 1 and w.split_mode == "row":
            acc.warnings.append(ROW_SPLIT_WARNING)
        return (w.split_mode or "layer"), [1.0] * gpus
    mode = str(acc.assume("split_mode", "layer", w.split_mode, "llama.cpp default -sm layer (common/common.h:485)"))
    if mode == "row":
        acc.warnings.append(ROW_SPLIT_WARNING)
    if mode == "none":
        raise InputError("split_mode none runs on one GPU (src/llama.cpp:289-301); use gpus 1 or split_mode layer/row")
    if w.tensor_split is None:
        acc.assume("tensor_split", ",".join(["1"] * gpus), None,
                   "llama.cpp splits by each GPU's free memory when no --tensor-split is given "
                   "(src/llama-model.cpp:1559-1574): equal shares for identical GPUs")
        return mode, [1.0] * gpus
    why = tensor_split_refusal(len(w.tensor_split), gpus, gpus)  # the gpus of one copy: one machine's (fit's rule)
    if why is not None:
        raise FieldError("tensor_split", f"tensor_split {why}")
    acc.assume("tensor_split", ",".join(f"{s:g}" for s in w.tensor_split), ",".join(f"{s:g}" for s in w.tensor_split), "given")
    return mode, list(w.tensor_split)


def _n_cpu_moe(ctx: Context) -> int:
    spec, w = ctx.spec, ctx.w
    if w.n_cpu_moe is None:
        return 0
    if not spec.is_moe:
        raise FieldError("n_cpu_moe", f"n_cpu_moe keeps MoE expert tensors in host memory; {spec.name} has no experts")
    if w.device != "gpu":
        raise InputError("n_cpu_moe applies to GPU offload; on device cpu every tensor is in host memory")
    # llama.cpp's --n-cpu-moe N pushes one buffer override per layer index 0..N-1 (common/arg.cpp:2766-2775
    # @0c1e57098; the same loop at @0017d6fb), each matching blk.i.ffn_*_exps (llm_ffn_exps_block_regex,
    # common/common.h:1198-1217): an index past the last layer matches no tensor, so N > layers is every layer
    layers = spec.num_layers
    if w.n_cpu_moe <= layers:
        return int(ctx.acc.assume("n_cpu_moe", w.n_cpu_moe, w.n_cpu_moe, "given (common/arg.cpp:2766-2775)"))
    ctx.acc.assumptions.append(Assumption(
        "n_cpu_moe", layers, False, f"given as {w.n_cpu_moe}; the model has {layers} layers (llama.cpp's "
        "--n-cpu-moe N keeps the experts of layers 0..N-1 in host memory, common/arg.cpp:2766-2775: past the last "
        "layer, all of them)"))
    return layers


def _per_gpu(parts: list[DevicePart], attr: str) -> str:
    if len(parts) <= 1:
        return ""
    return " (" + ", ".join(f"{p.name} {format_bytes(getattr(p, attr))}" for p in parts) + ")"


def _split_details(parts: list[DevicePart], mode: str, shares: list[float], ngl: int,
                   n_cpu_moe: int, gpu_runtime: str = "cuda") -> dict[str, Any]:
    ctx_b = context_span(gpu_runtime, NATIVE)
    devices = []
    for p in parts:
        gpu = p.name != "host"
        fixed = ctx_b.expected if gpu else E.LLAMACPP_HOST_RUNTIME.expected
        fixed_hi = ctx_b.high if gpu else E.LLAMACPP_HOST_RUNTIME.high
        holds = p.layer_range()
        if not gpu:
            holds = "token embd" + ("" if not (p.layers or p.output) else ", " + holds) \
                + (f", the experts of layers 0-{n_cpu_moe - 1}" if n_cpu_moe else "")
        devices.append({"device": p.name, "layers": holds, "n_layers": len(p.layers) + int(p.output),
                        "weights": p.weights, "experts": p.experts, "kv_cache": p.kv, "compute_buffer": p.compute,
                        "runtime": fixed, "total": p.total + fixed, "total_high": p.weights + p.kv + 2 * p.compute
                        + fixed_hi})
    return {"split_mode": mode, "tensor_split": shares, "n_gpu_layers": ngl, "n_cpu_moe": n_cpu_moe,
            "devices": devices}
