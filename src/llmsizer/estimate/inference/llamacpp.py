"""Engine profile 'llamacpp': GGUF weights split between host and device by -ngl, one unified KV cache.

Rules (llama.cpp ``src/llama-model.cpp``, ``src/llama-kv-cache.cpp``, ``src/llama-kv-cache-iswa.cpp``,
``src/llama-context.cpp``): token embeddings always stay in host memory; the last ``n_gpu_layers``
repeating layers go to the device, and the output layer too once ``n_gpu_layers`` > n_layer (a tied
model gets a device copy of token_embd, ``TENSOR_DUPLICATED``); the KV cache holds n_ctx cells for all
sequences (f16 K and V by default), a sliding-window layer holds
pad256(min(n_ctx, n_swa x n_seq + n_ubatch)) cells; the compute buffer is reserved for one ubatch with a
full cache, in f32.
"""

from __future__ import annotations

from ...formulas.activations import prefill_activation_bytes
from ...formulas.kv_cache import kv_cache, paged_tokens
from ...result import Item
from ...units import format_bytes
from .. import engines as E
from .common import Context, kv_item, state_item, weights_item


def compose_llamacpp(ctx: Context) -> None:
    spec, w, acc, wb = ctx.spec, ctx.w, ctx.acc, ctx.wb
    n = spec.num_layers
    on_gpu = w.device == "gpu"
    ngl = acc.assume("n_gpu_layers", n + 1 if on_gpu else 0, w.n_gpu_layers if on_gpu else None,
                     "all layers and the output layer offloaded" if on_gpu else "CPU only")
    ngl = min(ngl, n + 1) if on_gpu else 0
    ubatch = acc.assume("n_ubatch", E.LLAMACPP_N_UBATCH, w.n_ubatch, "llama.cpp default physical batch")
    layers_on = min(ngl, n)
    out_on_gpu = ngl > n
    out_matrix = wb.by_component.get("embedding" if spec.tie_word_embeddings else "lm_head", 0)
    out_bytes = out_matrix + 4 * spec.hidden_size  # + final norm (F32)
    gpu_w = sum(wb.layer_bytes[n - layers_on:]) + (out_bytes if out_on_gpu else 0)
    # what moved to the device leaves the host, except a tied output matrix, which is a device-side copy
    moved_out = (out_bytes - (out_matrix if spec.tie_word_embeddings else 0)) if out_on_gpu else 0
    host_w = wb.total - sum(wb.layer_bytes[n - layers_on:]) - moved_out
    n_ctx = paged_tokens(w.context * w.concurrency, E.LLAMACPP_KV_PAD)
    ctx.details["n_ctx"] = n_ctx
    swa_extra = (spec.sliding_window or 0) * (w.concurrency - 1) + ubatch
    if spec.model_type == "phi3" and spec.sliding_window:
        # llama.cpp disables Phi-3's sliding window (src/llama-model.cpp LLM_ARCH_PHI3: swa_type NONE): full KV
        swa_extra = n_ctx
        acc.warnings.append("llama.cpp runs Phi-3 without its sliding window: the KV cache holds the full context")
    kv_all = kv_cache(spec, n_ctx, 1, ctx.kv_dtype, mla_mode="latent", window_extra=swa_extra).total_bytes
    # the KV of the attention layers among the offloaded ones (hybrid models: layers without attention have none)
    attn_on = sum(1 for k in spec.layer_types[n - layers_on:] if k != "none")
    kv_dev = kv_all * attn_on // spec.attention_layers if spec.attention_layers else 0
    if on_gpu:
        acc.items.append(weights_item(wb, "device", gpu_w, f"; {layers_on}/{n} layers offloaded"
                                      + (" + output layer" if out_on_gpu else "")))
        acc.items.append(Item("weights_host", host_w, "host",
                              formula=f"token embeddings {format_bytes(wb.by_component.get('embedding', 0))} + "
                                      "layers kept on the CPU",
                              source="llama.cpp src/llama-model.cpp: the input layer stays in host memory"))
    else:
        acc.items.append(weights_item(wb, "host"))
    kv = kv_item(ctx, n_ctx, 1, "device" if on_gpu else "host", window_extra=swa_extra)
    if on_gpu and spec.attention_layers:
        acc.items.append(Item("kv_cache", kv_dev, "device", formula=kv.formula + f" x {attn_on}/"
                              f"{spec.attention_layers} layers", source=kv.source))
        if kv_all - kv_dev:
            acc.items.append(Item("kv_cache_host", kv_all - kv_dev, "host", formula="KV of the layers on the CPU"))
    elif spec.attention_layers:
        acc.items.append(kv)
    if spec.recurrent_layer_count:
        # one state row per sequence slot (n_seq_max = the concurrency), on the device of its layer
        st = state_item(ctx, w.concurrency, "device" if on_gpu else "host")
        if on_gpu:
            rec_on = sum(spec.recurrent_layers[n - layers_on:])
            dev_b = st.bytes * rec_on // max(spec.recurrent_layer_count, 1)
            acc.items.append(Item(st.name, dev_b, "device", formula=st.formula + f" x {rec_on}/"
                                  f"{spec.recurrent_layer_count} recurrent layers offloaded", source=st.source))
            if st.bytes - dev_b:
                acc.items.append(Item("recurrent_state_host", st.bytes - dev_b, "host",
                                      formula="state of the recurrent layers on the CPU", source=st.source))
        else:
            acc.items.append(st)
    graph = prefill_activation_bytes(spec, 1, min(ubatch, n_ctx), n_ctx, 4, "flash", logits_positions=ubatch,
                                     logits_bytes_per_elem=0)
    acc.items.append(Item("compute_buffer", graph.peak_bytes, "device" if on_gpu else "host",
                          low=graph.peak_bytes // 2, high=graph.peak_bytes * 2,
                          formula=f"f32 graph of one ubatch ({ubatch} tokens): residual + max(attention, mlp, "
                                  f"logits {ubatch} x vocab)",
                          source="formulas/activations.py applied to llama.cpp's f32 ggml graph "
                                 "(llama-context.cpp reserves it for n_ubatch tokens and a full cache)"))
    if on_gpu:
        acc.span("cuda_context", E.CUDA_CONTEXT)
    acc.span("host_runtime", E.LLAMACPP_HOST_RUNTIME, "host")
