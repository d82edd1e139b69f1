"""Engine profile 'transformers': Hugging Face ``generate()`` with the default DynamicCache.

Peak = max over the two phases of (KV cache then held + activations of that step):
end of prefill (KV of the prompt, a forward over the whole prompt) and end of decoding (KV of the full
context, a one-token forward). Logits are computed for the last position only and upcast to fp32
(transformers ``GenerationMixin``: ``logits_to_keep=1``; ``next_token_logits.to(torch.float32)``).
bitsandbytes 4-bit layers dequantize the whole weight to the compute dtype for inputs of more than one
token (bitsandbytes ``autograd/_functions.py`` ``matmul_4bit``: ``gemv_4bit`` only for a single token,
else ``dequantize_4bit(...).to(A.dtype)``), so prefill holds one dequantized matrix at a time.
A third moment can be the peak: the end of loading, when an AWQ checkpoint of a tied-embedding model (AutoAWQ
<= 0.2.6 stores ``lm_head.weight`` beside ``embed_tokens.weight``) holds its second copy of the matrix until
``from_pretrained`` re-ties the two (formulas/checkpoint_loading.py eq. L1); the page script's
``max_memory_allocated`` counts it.
"""

from __future__ import annotations

from ...formulas import caching_allocator as CA
from ...formulas import encoder_decoder_serving as ED
from ...formulas.activations import prefill_activation_bytes
from ...formulas.checkpoint_loading import stored_tied_copy_bytes
from ...formulas.kv_cache import cross_attention_kv, kv_dtype_bytes, kv_dtype_name
from ...formulas.tensor_parallel import activation_split, kv_fraction_per_device, per_device
from ...formulas.weight_formats import largest_quantized_matrix
from ...result import Item, Location
from ...specs.training import default_mamba_path
from ...specs.workload import DEFAULT_ATTENTION, default_output_tokens, prompt_and_output
from ...units import format_bytes
from .. import engines as E
from ..allocator import INFERENCE, RESERVE, ConcatGrowth, concat_kv_reserve, device_context
from ..formats import serving_fused_experts
from ..model_warnings import source_length_warning
from .common import Context, kv_item, state_item, weights_item


def compose_transformers(ctx: Context) -> None:
    spec, w, acc = ctx.spec, ctx.w, ctx.acc
    loc: Location = "host" if w.device == "cpu" else "device"
    if spec.encoder_decoder is not None:
        compose_t5(ctx, loc)
        return
    out = acc.assume("output_tokens", default_output_tokens(w.context), w.output_tokens,
                     "not given: min(256, context / 2) generated tokens, the one default of estimates, plans and "
                     "the web calculator (specs/workload.py default_output_tokens)")
    prompt = prompt_and_output(w.context, int(out))[0]
    attention = acc.assume("attention", DEFAULT_ATTENTION, w.attention,
                           "transformers default attn_implementation (no score matrix kept)")
    split = activation_split("transformers", spec.model_type)  # what the model's TP plan splits
    pre = prefill_activation_bytes(spec, w.concurrency, prompt, prompt, ctx.act_bytes, attention,
                                   tp=w.tensor_parallel, forward_locals=True,
                                   recurrent_scan=default_mamba_path(w.device, w.gpu_runtime) == "torch", split=split)
    dec = prefill_activation_bytes(spec, w.concurrency, 1, w.context, ctx.act_bytes, attention, tp=w.tensor_parallel,
                                   forward_locals=True, split=split)
    # right after prefill a sliding layer still holds the whole prompt (see engines.TRANSFORMERS)
    kv_prompt = kv_item(ctx, prompt, w.concurrency, loc, window_extra=prompt)
    kv_end = kv_item(ctx, w.context, w.concurrency, loc)
    dequant = 0
    if ctx.fmt in ("nf4", "nf4-dq", "fp4", "fp4-dq") and prompt > 1:
        fused = serving_fused_experts(spec, "transformers", ctx.fmt)  # fused experts are not 4-bit: not dequantized
        dequant = largest_quantized_matrix(spec, ctx.fmt, fused) * ctx.act_bytes
    if kv_prompt.bytes + pre.peak_bytes + dequant >= kv_end.bytes + dec.peak_bytes:
        kv, act, phase, deq = kv_prompt, pre, f"end of prefill ({prompt} prompt tokens)", dequant
    else:
        kv, act, phase, deq = kv_end, dec, f"end of decoding ({w.context} tokens)", 0
    act_item = Item(
        "activations", act.peak_bytes, loc, high=act.peak_bytes + act.logits_bytes,
        formula=f"residual {format_bytes(act.residual_bytes)} + max(attention {format_bytes(act.attention_bytes)}, "
                f"mlp {format_bytes(act.mlp_bytes)}, logits {format_bytes(act.logits_bytes)}"
                + (f", recurrent mixer {format_bytes(act.mixer_bytes)}" if act.mixer_bytes else "") + f") at {phase}",
        source="formulas/activations.py (transformers modeling_llama.py LlamaMLP, eager_attention_forward)"
               + ("; formulas/recurrent_activations.py eqs. M4, G4, M5 (the torch path's scans)"
                  if act.mixer_bytes else ""))
    if ctx.media is not None:
        # the vision tower runs at the start of the first forward over every image of the batch, before any K/V
        # is written (modeling_gemma3.py Gemma3Model.forward: get_image_features, then the decoder layers)
        enc = ctx.media.encoder(spec, ctx.media.encoder_sequences * w.concurrency, ctx.act_bytes, attention)
        if enc is not None and enc.peak_bytes > kv.bytes + act.peak_bytes + deq:
            phase = f"vision encoder ({ctx.media.encoder_sequences * w.concurrency} images)"
            kv = kv_item(ctx, 0, w.concurrency, loc)
            deq = 0
            act_item = Item(
                "activations", enc.peak_bytes, loc,
                formula=f"pixel_values {format_bytes(enc.pixels_bytes)}"
                        + (f" + held {format_bytes(enc.held_bytes)}" if enc.held_bytes else "")
                        + f" + max(attention {format_bytes(enc.attention_bytes)}, mlp {format_bytes(enc.mlp_bytes)}"
                        + (f", tail {format_bytes(enc.tail_bytes)}" if enc.tail_bytes else "") + f") at {phase}",
                source="formulas/vision_activations.py eqs. (1)-(4) (transformers modeling_siglip.py), (5)-(8) "
                       "(modeling_qwen2_5_vl.py, modeling_qwen3_vl.py), (9)-(13) (modeling_mllama.py), (14)-(17) "
                       "(modeling_llama4.py)")
    tied_copy = _tied_copy_on_load(ctx)
    loading = tied_copy > kv.bytes + act_item.bytes + deq and not spec.recurrent_layer_count
    if loading:  # nothing of generate() exists yet: no K/V, no activations
        phase, deq = "end of loading (before generate(): the checkpoint's second copy of the tied embedding)", 0
        kv = kv_item(ctx, 0, w.concurrency, loc)
        act_item = Item("activations", 0, loc, formula=f"none at {phase}",
                        source="transformers modeling_utils.py from_pretrained (the re-tie follows the last tensor)")
    ctx.details["peak_phase"] = phase
    acc.items.append(weights_item(ctx.wb, loc))
    if loading:
        acc.items.append(Item("tied_copy_on_load", tied_copy, loc,
                              formula=f"lm_head.weight stored beside the tied embedding: 1 x {format_bytes(tied_copy)} "
                                      "held until from_pretrained re-ties them (eq. L1)",
                              source="formulas/checkpoint_loading.py eq. (L1) (AutoAWQ base.py save_quantized @ "
                                     "v0.2.6; transformers 4.46.0 modeling_utils.py L908-992, L4245)"))
    if spec.kv_cache_layers:
        acc.items.append(kv)
    if spec.recurrent_layer_count:  # the same after prefill and at the end: it does not grow with the context
        acc.items.append(state_item(ctx, w.concurrency, loc))
    if ctx.media is not None and ctx.media.cross_tokens and not loading:  # written by the first forward, held to the end
        cross, share = ctx.media.cross_tokens, kv_fraction_per_device(spec, w.tensor_parallel, False,
                                                                         "transformers")
        acc.items.append(Item(
            "cross_attention_kv", per_device(cross_attention_kv(spec, cross, w.concurrency, ctx.kv_dtype), share), loc,
            formula=f"{spec.cross_attention_layer_count} cross-attention layers x 2 x {spec.num_kv_heads} kv_heads x "
                    f"{spec.head_dim} head_dim x {cross} image states x {kv_dtype_bytes(ctx.kv_dtype):g} B "
                    f"({ctx.kv_dtype}) x {w.concurrency} seqs" + (f" x {share:g} per device" if share < 1 else ""),
            source="formulas/kv_cache.py eq. (4) (transformers modeling_mllama.py MllamaTextCrossAttention)"))
    acc.items.append(act_item)
    if deq:
        acc.items.append(Item("dequant_buffer", deq, loc,
                              formula="largest 4-bit matrix dequantized to the compute dtype during prefill",
                              source="bitsandbytes autograd/_functions.py matmul_4bit (dequantize_4bit for >1 token)"))
    if loc == "device" and not loading:
        ctx.kv_growth = concat_growth(ctx, kv, kv_end, act_item, prompt, int(out))
    if loc == "device":
        device_context(acc.items, acc.assumptions, w.gpu_runtime)
        acc.items.append(Item("allocator_cache", 0, "device", low=0, high=act_item.bytes,
                              formula="reserved - allocated: 0 expected, up to one more activation peak cached",
                              source="PyTorch CUDA caching allocator keeps freed blocks (docs 'CUDA semantics')"))
    acc.span("host_runtime", E.TORCH_HOST_RUNTIME, "host")


def concat_growth(ctx: Context, kv: Item, kv_end: Item, act: Item, prompt: int, steps: int) -> ConcatGrowth | None:
    """The DynamicCache's growth by torch.cat from the ``prompt`` to the context over ``steps`` decode steps
    (allocator.py ``ConcatGrowth``, formulas/caching_allocator.py eq. C1'): every layer a full-attention layer
    holding one K and one V tensor of the batch (no sliding window, whose DynamicSlidingWindowLayer crops; no MLA,
    recurrent state, cross-attention or quantized cache, whose layers grow otherwise), ``kv``/``act`` the items at
    the peak. None where it does not apply; a warning where the blocks are under 10 MiB (eq. C1' not derived)."""
    spec, w = ctx.spec, ctx.w
    if w.metric not in ("reserved", "nvidia-smi") or w.gpu_runtime not in ("cuda", "rocm"):
        # only those metrics read it (allocator.py apply_metric), and eq. C1' is PyTorch's CUDA caching allocator's
        # (HIP builds share it); Metal, Gaudi's and XLA's allocators are not modelled (review23b D2, D3)
        return None
    layers = spec.kv_cache_layers
    if (not steps or not layers or spec.mla is not None or spec.full_head_dim or spec.recurrent_layer_count
            or any(k != "full" for k in spec.kv_cache_layer_types) or E.kv_layout("transformers", kv_dtype_name(ctx.kv_dtype),
                                                                                   ctx.act_bytes)
            or (ctx.media is not None and ctx.media.cross_tokens) or kv_end.bytes % (2 * layers * w.context)):
        return None
    per_token = kv_end.bytes // (2 * layers * w.context)  # one layer's K of one token, the batch's sequences
    if not CA.concat_growth_in_closed_form(per_token, prompt):
        if w.metric in ("reserved", "nvidia-smi") and CA.segment_bytes(w.context * per_token) > CA.SMALL_BUFFER:
            ctx.acc.warnings.append(
                f"the KV cache grows by torch.cat (DynamicCache) in blocks under 10 MiB ({format_bytes(prompt * per_token)}"
                f" per layer's K at the prompt): they share 20 MiB segments, whose reserve eq. C1' does not derive "
                "(a replay gives 1.04-1.86x the live cache for a 32-layer cache at 512-6000 tokens); the reserve "
                "is the calibrated ratio's")
        return None
    pool = CA.concat_growth_reserved_bytes(layers, per_token, prompt, steps)
    growth = ConcatGrowth(pool, kv.bytes, act.bytes,
                          f"DynamicCache grown by torch.cat, {layers} layers x K and V of {format_bytes(per_token)} "
                          f"per token from {prompt} to {w.context} tokens")
    high = concat_kv_reserve(growth)[1]
    if w.metric in ("reserved", "nvidia-smi") and high > kv.bytes * (RESERVE[INFERENCE].high - 1):
        ctx.acc.warnings.append(
            f"the KV cache grows by torch.cat (DynamicCache): its old segments keep up to {format_bytes(high)} "
            f"reserved beyond the cache's {format_bytes(kv.bytes)} (eq. C1', {format_bytes(pool)} in all), past the "
            "calibrated reserve; they hold no live block, so a run short of memory releases them and retries "
            "(max_memory_reserved stops at the device's memory) and the need (default metric) does not count them; "
            "a StaticCache (cache_implementation='static') allocates the cache once")
    return growth


def _tied_copy_on_load(ctx: Context) -> int:
    """Bytes of the tied embedding's second copy held at the end of loading (formulas/checkpoint_loading.py eq. L1),
    T in the load dtype (the weights' embedding) x c, the extra names the checkpoint stores it under: read from the
    weight files' headers where the model was read from safetensors (c = 1 when they hold lm_head.weight, whatever
    the format: a file written by ``save_pretrained`` drops it, one by AutoAWQ <= 0.2.6 keeps it); for a catalog model
    (no files) assumed 1 for an AWQ checkpoint, the files AutoAWQ <= 0.2.6 writes, else 0."""
    spec, fw = ctx.spec, ctx.spec.file_weights
    if not spec.tie_word_embeddings:
        return 0
    if fw is not None and not fw.gguf:  # the file says (before: the format name did, review15 D3a)
        if not fw.output_bytes:
            return 0
        extra = int(ctx.acc.assume(
            "tied_lm_head_in_file", 1, None,
            f"the weight files store lm_head.weight ({fw.output_bytes:,} B, read from their safetensors headers) beside "
            "the tied embedding: transformers loads both and re-ties them only after the last tensor, so loading "
            "peaks at weights + one copy of the embedding (formulas/checkpoint_loading.py eq. L1)"))
    elif ctx.fmt == "awq-int4":
        extra = int(ctx.acc.assume(
            "awq_tied_lm_head_copy", 1, None,
            "an AWQ checkpoint of a tied-embedding model stores lm_head.weight beside embed_tokens.weight (AutoAWQ <= "
            "0.2.6 save_quantized writes every state_dict name, awq/models/base.py L302-312 @ v0.2.6); transformers "
            "loads both and re-ties them only after the last tensor, so loading peaks at weights + one copy of the "
            "embedding (formulas/checkpoint_loading.py eq. L1)"))
    else:
        return 0
    return stored_tied_copy_bytes(ctx.wb.by_component.get("embedding", 0), extra)


# line numbers of transformers v5.24.0 (the release formulas/encoder_decoder_serving.py is read from; checked there)
FP16_T5 = ("T5 v1.1 / mT5 / T0 / mT0 activations overflow float16 (transformers clamps inf in T5Block.forward, "
           "modeling_t5.py L472-479, and keeps wo in fp32 on an fp16 load: L542, modeling_utils.py L3848-3852, "
           "issue #20287); serve them in bf16 or fp32")


def compose_t5(ctx: Context, loc: Location) -> None:
    """A T5 encoder-decoder under ``generate()`` (formulas/encoder_decoder_serving.py): the source is the prompt
    (context - output tokens), the target the output tokens. Peak = weights + max(the encoder's forward (eq. S4),
    the end of decoding: self K/V over the target + cross K/V over the source + the kept encoder output + the
    last step's transient (eq. S5))."""
    spec, w, acc = ctx.spec, ctx.w, ctx.acc
    asked = int(acc.assume("output_tokens", default_output_tokens(w.context), w.output_tokens,
                           "not given: min(256, context / 2) generated tokens (specs/workload.py "
                           "default_output_tokens); for an encoder-decoder the target tokens, the decoder's length"))
    source, out = prompt_and_output(w.context, asked)  # the split fit's speed takes (one rule)
    long = source_length_warning(spec, source)
    if long is not None:
        acc.warnings.append(long)
    acc.assume("source_tokens", source, None, "an encoder-decoder's source = context - output tokens: the encoder "
               "reads the prompt, the decoder writes the output (formulas/encoder_decoder_serving.py)")
    attention = str(acc.assume("attention", DEFAULT_ATTENTION, w.attention,
                               "transformers default attn_implementation (T5: sdpa with the position bias as mask)"))
    if attention not in ED.ATTENTIONS:
        from ...errors import InputError
        raise InputError(f"attention {attention!r}: a T5 is modelled with {', '.join(ED.ATTENTIONS)}")
    if "fp16" in (ctx.dtype, ctx.fmt):
        acc.warnings.append(FP16_T5)
    extra = ED.fp32_kept_extra_bytes(spec, ctx.fmt)  # the load dtype decides (eq. S6)
    b, c = w.concurrency, ctx.act_bytes
    enc = ED.encoder_peak(spec, b, source, c, attention)
    self_kv = kv_item(ctx, out, b, loc)
    cross = cross_attention_kv(spec, source, b, ctx.kv_dtype)
    held = ED.encoder_output_bytes(spec, b, source, c)
    trans = ED.decode_transient_bytes(spec, b, out, c)
    decoding = self_kv.bytes + cross + held + trans
    src = "formulas/encoder_decoder_serving.py (transformers modeling_t5.py, generation/utils.py)"
    acc.items.append(weights_item(ctx.wb, loc, ctx.wb.total + extra,
                                  f"; + {format_bytes(extra)}: wo kept in fp32 on an fp16 load (eq. S6)"
                                  if extra else ""))
    cross_formula = (f"{spec.kv_cache_layers} decoder layers x 2 x {spec.num_kv_heads} heads x {spec.head_dim} d_kv x "
                     f"{source} source tokens x {kv_dtype_bytes(ctx.kv_dtype):g} B ({ctx.kv_dtype}) x {b} seqs")
    if enc.peak_bytes > decoding:
        phase = f"encoder forward ({b} x {source} source tokens, {enc.phase})"
        acc.items.append(kv_item(ctx, 0, b, loc))
        acc.items.append(Item("cross_attention_kv", 0, loc, formula="not yet written: " + cross_formula,
                              source="formulas/kv_cache.py eq. (4)"))
        acc.items.append(Item("activations", enc.peak_bytes, loc,
                              formula=f"max(position buckets {format_bytes(enc.bucket_bytes)}, self-attention "
                                      f"{format_bytes(enc.attention_bytes)}, feed-forward "
                                      f"{format_bytes(enc.ffn_bytes)}) at {phase}",
                              source=src + " eqs. (S1)-(S4)"))
    else:
        phase = f"end of decoding ({out} target tokens over {source} source tokens)"
        acc.items.append(self_kv)
        acc.items.append(Item("cross_attention_kv", cross, loc, formula=cross_formula,
                              source="formulas/kv_cache.py eq. (4) (transformers EncoderDecoderCache)"))
        acc.items.append(Item("activations", held + trans, loc,
                              formula=f"encoder output {format_bytes(held)} kept by generate() + last step "
                                      f"{format_bytes(trans)} (logits or the cache append) at {phase}",
                              source=src + " eq. (S5)"))
    ctx.details["peak_phase"] = phase
    ctx.details["encoder_decoder"] = {"source_tokens": source, "target_tokens": out,
                                      "encoder_peak_bytes": enc.peak_bytes, "decoding_bytes": decoding,
                                      "cross_attention_kv_bytes": cross, "self_attention_kv_bytes": self_kv.bytes}
    if loc == "device":
        act = acc.items[-1].bytes
        device_context(acc.items, acc.assumptions, w.gpu_runtime)
        acc.items.append(Item("allocator_cache", 0, "device", low=0, high=act,
                              formula="reserved - allocated: 0 expected, up to one more activation peak cached",
                              source="PyTorch CUDA caching allocator keeps freed blocks (docs 'CUDA semantics')"))
    acc.span("host_runtime", E.TORCH_HOST_RUNTIME, "host")
