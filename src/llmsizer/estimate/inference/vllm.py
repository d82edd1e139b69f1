"""Engine profile 'vllm': a fixed memory pool filled with KV blocks.

vLLM (``v1/worker/gpu_worker.py`` ``determine_available_memory``) sizes the KV pool as

    kv_pool = gpu_memory_utilization x total_memory - weights - peak_activation - non_torch - cudagraph   (1)

where ``total_memory`` is CUDA's total (``MemorySnapshot.total_memory``, torch.cuda.mem_get_info's: nvidia-smi's
memory.total less the driver's reserve; the workload's ``cuda_memory``, else its ``memory``, common.py ``cuda_total``)

where ``peak_activation`` is the torch peak of a profile run: one forward over ``max_num_batched_tokens``
tokens and a dummy sampler over ``max_num_seqs`` sequences (``gpu_model_runner.profile_run``). The CUDA
context itself is outside the pool, in the (1 - utilization) headroom. Blocks of ``block_size`` tokens
(Kwon et al. 2023, PagedAttention, section 4.2); a sliding-window layer needs at most
ceil(min(window - 1 + max_num_batched_tokens, context) / block) + 1 blocks per request
(``v1/kv_cache_interface.py`` ``SlidingWindowSpec.max_memory_usage_bytes``); MLA caches the latent
(``MLAAttentionSpec``). Admitted sequences = pool / per-sequence KV (the log line "Maximum concurrency
for N tokens per request"). A model with layers of several cache kinds (sliding + full, chunked + full, recurrent +
attention) shares blocks among KV cache groups of equal layer count, and a kind whose layers do not fill its last
group carries empty slots each request pays for (formulas/kv_groups.py eqs. 1-3: Gemma-3-27B's 52 sliding layers
take 60 slots). The log line beside it, "GPU KV cache size: N tokens" (``kv_tokens``), is the admitted concurrency
x max_model_len from vLLM 0.21 (formulas/kv_groups.py eq. 6; engines.VLLM_KV_SIZE_LOG_CONCURRENCY_SINCE); before, it
shares the pool's blocks evenly among all the groups, recurrent ones included, at the smallest block size (eqs. 4-5).

A model without attention layers (pure Mamba/Mamba-2) has no KV blocks: its one KV-cache group is the recurrent
layers' ``MambaSpec``, whose block is a whole request (``MambaSpec(block_size=model_config.max_model_len)``,
vllm/model_executor/models/config.py ``HybridAttentionMambaModelConfig`` @0144dd5), so each block is one sequence's
state page per layer and the pool holds ``pool / state per sequence`` sequences whatever their length. vLLM's
log line "GPU KV cache size: N tokens" is then ``num_blocks x max_model_len`` (vllm/v1/core/kv_cache_utils.py
``_report_kv_cache_config`` @001cabc: ``num_blocks // len(groups) x min block_size``), a count of sequences times
the maximum length rather than of cached tokens; llmsizer reports the sequences (``recurrent_state_pages``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

from ...formulas.activations import prefill_activation_bytes
from ...formulas.kv_cache import KVCache, kv_cache, kv_dtype_bytes
from ...formulas.kv_groups import (
    vllm_concurrency_kv_tokens,
    vllm_group_count,
    vllm_group_size,
    vllm_num_blocks,
    vllm_padding_slots,
    vllm_reported_kv_tokens,
    vllm_unified_block,
)
from ...formulas.recurrent_state import layer_state_bytes_per_device
from ...formulas.tensor_parallel import kv_fraction_per_device, per_device
from ...formulas.vllm_mixer_profile import vllm_mamba2_step_bytes
from ...formulas.vllm_mxfp4 import vllm_mxfp4_backend, vllm_mxfp4_resident_extra
from ...result import Assumption, Item
from ...specs.model import ModelSpec
from ...units import format_bytes
from .. import engines as E
from ..allocator import context_span, device_context
from ..device import weights_capability
from ..verdict import vllm_pool_bytes, vllm_pool_words
from .common import Context, cuda_total, kv_item, running_sequences, state_dtypes, state_item, weights_item
from .media import Media, largest_image


def no_pool_remedy(num_heads: int) -> str:
    """What the line of a vLLM that does not start (no KV pool) advises: the estimate's own remedy, which fit
    replaces where a nearer one is known on the devices it was given (estimate/fit.py ``async_stages_note``)."""
    return (f"use a smaller weight format, more devices (a tensor-parallel degree dividing the {num_heads} attention "
            "heads, or pipeline stages) or a higher gpu_memory_utilization")


def vllm_batch_defaults(memory: int | None) -> tuple[int, int]:
    """vLLM's (max_num_seqs, max_num_batched_tokens) defaults for `vllm serve` on a GPU of ``memory`` bytes
    (estimate/engines.py VLLM_MAX_NUM_SEQS*: EngineArgs._set_default_args). Without a memory the smaller pair."""
    if memory is not None and memory >= E.VLLM_BIG_GPU_BYTES:
        return E.VLLM_MAX_NUM_SEQS_BIG, E.VLLM_MAX_NUM_BATCHED_TOKENS_BIG
    return E.VLLM_MAX_NUM_SEQS, E.VLLM_MAX_NUM_BATCHED_TOKENS


# vLLM's profile run takes the modality whose largest item holds the most tokens (vllm/multimodal/encoder_budget.py
# @042a4d3e, ``get_modality_with_max_tokens``); for a video processor (Qwen2-VL family) the largest video's tokens
# grow with max_model_len less the images' (``get_max_video_tokens(seq_len)``), so at a long context the profile may
# encode video instead of the largest image: not modelled, said on every answer for such a model.
VIDEO_PROFILE_NOT_MODELLED = ("this model also takes video: vLLM's profile run encodes video instead of images when "
                              "its largest video (growing with the context) holds more tokens than its largest image, "
                              "which is not modelled: the vision encoder's peak counted is the images' (vllm "
                              "encoder_budget.py get_modality_with_max_tokens)")


def vllm_profile_images(ctx: Context, mnbt: int, mns: int) -> tuple[Media, int, str] | None:
    """The images vLLM's profile run encodes: ``n`` items of the processor's largest image (T embeddings each,
    ``media.largest_image``), at start-up and whatever images the requests send
    (vllm-project/vllm@042a4d3ee43ed07875505b04e93a5a14ddf86964 vllm/multimodal/encoder_budget.py
    ``MultiModalBudget._get_max_items``; the budget from vllm/v1/core/encoder_cache_manager.py
    ``compute_mm_encoder_budget``, both of SchedulerConfig's encoder limits = max_num_batched_tokens B)::

        budget = max(B, T);  per_prompt = max(1, max_model_len // T);  n = max(1, min(budget // T, S x per_prompt))

    (S = max_num_seqs; limit_mm_per_prompt taken as unbounded, its default; chunked prefill on, the V1 default).
    A model whose processor tiles (Llama 4, Llama-3.2-Vision) is profiled here with the request's images; a
    video processor whose largest video holds more tokens than its largest image (vLLM then profiles video) is not
    modelled (``VIDEO_PROFILE_NOT_MODELLED``, warned by ``compose_vllm``). None: no vision encoder, or a tiled one and no images in the request."""
    spec = ctx.spec
    big = largest_image(spec)
    if big is None:
        m = ctx.media
        return (m, 1, "one request's images") if m is not None else None
    media, t = big
    n = max(1, min(max(mnbt, t) // t, mns * max(1, ctx.w.context // t)))
    return media, n, (f"{n} dummy image(s) of the processor's largest size ({t} tokens each; vLLM's profile run, "
                      "whatever the requests send)")


# vLLM's MXFP4 MoE backend by the GPU's CUDA compute capability (vllm 0.19.1 fused_moe/oracle/mxfp4.py
# select_mxfp4_moe_backend: formulas/vllm_mxfp4.py vllm_mxfp4_backend), each with what it keeps resident
VLLM_MXFP4_BACKEND_WHY = {
    "triton": ("Triton matmul_ogs, vLLM's MXFP4 MoE backend on Hopper (compute capability 9.x): swizzled scales "
               "beside the loaded ones, float32 biases, I padded to 64 (formulas/vllm_mxfp4.py eq. X1)"),
    "marlin": ("Marlin, vLLM's MXFP4 MoE backend on Ampere / Ada (8.x) and on 11.0 and above (consumer Blackwell "
               "12.x): the experts repacked at H padded to 256 and I to 128, bf16 biases (formulas/vllm_mxfp4.py "
               "eq. X2)"),
    "flashinfer_trtllm": ("FlashInfer TRT-LLM, vLLM's MXFP4 MoE backend on the SM100 family (10.x: B200, B300): "
                          "the experts shuffled at H and I padded to 256, float32 biases (formulas/vllm_mxfp4.py "
                          "eq. X3)"),
}
VLLM_MXFP4_STORAGE = {
    "triton": "vLLM Triton swizzled scales + fp32 biases (eq. X1)",
    "marlin": "vLLM Marlin padding of the experts (eq. X2)",
    "flashinfer_trtllm": "vLLM FlashInfer TRT-LLM padding + fp32 biases (eq. X3)",
}


def _mxfp4_experts(ctx: Context) -> None:
    """The bytes vLLM's MXFP4 MoE holds beyond the checkpoint's experts on the backend the device's CUDA compute
    capability selects (formulas/vllm_mxfp4.py eq. X1-X3; the capability: estimate/device.py weights_capability),
    added to the weights this engine keeps resident (``ctx.wb``: compose's weights item and ``weights_bytes`` include
    them; the decode's bytes read stay the checkpoint's, review35 D4). The backend is named as an assumption: where the capability is not known (no device
    named) or the device runs without CUDA, Hopper's Triton backend is taken and said."""
    w = ctx.w
    capability = weights_capability(w.device, w.gpu_runtime, w.gpu_capability, w.engine, ctx.spec.model_type,
                                    ctx.fmt)
    extra = vllm_mxfp4_resident_extra(ctx.spec, ctx.fmt, w.tensor_parallel, capability)
    if not extra:
        return
    backend = vllm_mxfp4_backend(capability)
    where = ("compute capability not known: sized as on Hopper" if capability is None
             else "no CUDA (ROCm's CK / Triton, XPU not modelled): sized as on Hopper" if capability == 0
             else f"compute capability {capability // 10}.{capability % 10}")
    ctx.acc.assumptions.append(Assumption("vllm_mxfp4_backend", backend, True,
                                          f"{VLLM_MXFP4_BACKEND_WHY[backend]}; {where}"))
    storage = dict(ctx.wb.by_storage)
    storage[VLLM_MXFP4_STORAGE[backend]] = extra
    ctx.wb = replace(ctx.wb, total=ctx.wb.total + extra, by_storage=storage)


def sampler_bytes_per_logit(ctx: Context) -> tuple[float, str]:
    """Bytes the profile run's dummy sampler holds per logit (num_reqs x vocab) and what says so: on vLLM 0.10.0-0.11.0
    over CUDA (FlashInfer top-k/top-p sampling by default, estimate/engines.py VLLM_FLASHINFER_SAMPLER_RELEASES) the
    model-dtype logits plus three float32 copies (VLLM_SAMPLER_FLASHINFER_FP32_COPIES); otherwise the PyTorch-native
    sort's figure derived from the llm-d logs (VLLM_SAMPLER_BYTES_PER_LOGIT)."""
    w = ctx.w
    capability = weights_capability(w.device, w.gpu_runtime, w.gpu_capability, w.engine, ctx.spec.model_type,
                                    ctx.fmt)
    first, until = E.VLLM_FLASHINFER_SAMPLER_RELEASES
    if first <= E.release_patch("vllm", w.engine_version) < until and capability != 0:
        per = ctx.act_bytes + 4 * E.VLLM_SAMPLER_FLASHINFER_FP32_COPIES
        why = (f"FlashInfer top-k/top-p sampling, vLLM's default on CUDA in 0.10.0-0.11.0 with FlashInfer installed (as in "
               f"the vllm-openai image; a pip install without the [flashinfer] extra sorts natively, "
               f"{E.VLLM_SAMPLER_BYTES_PER_LOGIT} B per logit): {ctx.act_bytes} B model-dtype logits + "
               f"{E.VLLM_SAMPLER_FLASHINFER_FP32_COPIES} float32 copies")
        ctx.acc.assumptions.append(Assumption("vllm_sampler", "flashinfer", True, why))
        return per, "FlashInfer"
    return E.VLLM_SAMPLER_BYTES_PER_LOGIT, "native sort"


def compose_vllm(ctx: Context) -> None:
    spec, w, acc = ctx.spec, ctx.w, ctx.acc
    _mxfp4_experts(ctx)
    seqs_default, tokens_default = vllm_batch_defaults(w.memory)
    why = ("vllm serve default on GPUs with >= 70 GiB (EngineArgs batch defaults; vLLM gives an A100 the smaller "
           "pair, which the memory alone does not tell: give --max-num-seqs 256 --max-num-batched-tokens 2048 there)"
           if seqs_default == E.VLLM_MAX_NUM_SEQS_BIG else "vllm serve default on GPUs under 70 GiB (or memory not given)")
    util = acc.assume("gpu_memory_utilization", E.VLLM_GPU_MEMORY_UTILIZATION, w.gpu_memory_utilization,
                      "vLLM CacheConfig default (0.92 on the newest main; 0.9 in released docs)")
    mnbt = acc.assume("max_num_batched_tokens", tokens_default, w.max_num_batched_tokens, why)
    # vLLM's default is capped at max_num_batched_tokens (EngineArgs._set_default_args: min(table, mnbt))
    mns = acc.assume("max_num_seqs", min(seqs_default, mnbt), w.max_num_seqs,
                     why + ("" if seqs_default <= mnbt else f"; min(its {seqs_default}, max_num_batched_tokens)"))
    block = acc.assume("block_size", 16, w.paged_block_size, "vLLM default KV block (tokens)")
    tp = w.tensor_parallel
    page = None  # a recurrent layer's state page per sequence and GPU (padded to the attention page in a hybrid)
    if spec.recurrent_layer_count:
        acc.assume("mamba_cache_mode", "none", None,
                   "vLLM CacheConfig default: one recurrent state page per request and layer, no cached prefix states "
                   "(with prefix caching, 'align'/'all' keep more pages)")
        block, page = _hybrid_pages(ctx, block)
    # a recurrent mixer's peak in the profile run is its own layer kind (formulas/vllm_mixer_profile.py eqs. V1-V3:
    # the run has no attention metadata, so the mixers skip their chunked scans and hold only their projections)
    fwd = prefill_activation_bytes(spec, 1, mnbt, mnbt, ctx.act_bytes, "flash", logits_positions=0, tp=tp,
                                   vllm_profile=True)
    if fwd.mixer_bytes:
        acc.assume("vllm_hybrid_engine", "V1", None,
                   "formulas/vllm_mixer_profile.py eqs. V1-V4 (the profile run without attention metadata, the "
                   "mixers' scans skipped) read vLLM's V1 engine (0.23.0 wheel); taken at every --engine-version: "
                   "releases before V1's Mamba support (on main from July 2025, vllm-project/vllm PR #20499 "
                   "'Update V1 docs for Mamba models'; about 0.10) served hybrid models on the V0 engine, whose "
                   "profile forward had attention metadata and ran the chunked scan: not modelled")
    # the sampler's dummy run: on the last pipeline stage only (Context.last_stage)
    per_logit, sampler_path = sampler_bytes_per_logit(ctx) if ctx.last_stage else (0.0, "")
    sampler = int(min(mns, mnbt) * spec.vocab_size * per_logit)
    act = max(fwd.peak_bytes, sampler)
    encoder = ""
    profile = vllm_profile_images(ctx, mnbt, mns)
    if profile is not None:
        # the profile run also encodes dummy images (gpu_model_runner.profile_run: a batch of the processor's largest
        # image through the encoder before the text forward, whatever the requests will send); its peak counts when
        # it is the larger
        media, items, words = profile
        enc = media.encoder(spec, items * media.encoder_sequences, ctx.act_bytes, "flash")
        if enc is not None:
            act = max(act, enc.peak_bytes)
            encoder = f", vision encoder over {words} {format_bytes(enc.peak_bytes)}"
        if spec.vision is not None and spec.vision.video_max_pixels:
            acc.warnings.append(VIDEO_PROFILE_NOT_MODELLED)
    acc.items.append(weights_item(ctx.wb, "device"))
    acc.items.append(Item(
        "activations", act, "device", low=min(fwd.peak_bytes, act), high=max(fwd.peak_bytes + sampler, act),
        formula=f"profile run: max(forward over {mnbt} tokens {format_bytes(fwd.peak_bytes)}"
                + (f" (recurrent mixer {format_bytes(fwd.mixer_bytes)}, eqs. V1-V3)" if fwd.mixer_bytes else "")
                + (f", sampler {min(mns, mnbt)} seqs x vocab {spec.vocab_size} x {per_logit:g} B ({sampler_path}) "
                   f"{format_bytes(sampler)}" if ctx.last_stage else ", no sampler before the last pipeline stage")
                + f"{encoder})",
        source="vLLM gpu_model_runner.profile_run; sampler bytes per logit derived from the llm-d vLLM memory table "
               "(estimate/engines.py VLLM_SAMPLER_BYTES_PER_LOGIT), or on FlashInfer's path read from vLLM 0.10.2 and "
               "flashinfer 0.3.0 (VLLM_SAMPLER_FLASHINFER_FP32_COPIES)"
               + ("; recurrent mixers: formulas/vllm_mixer_profile.py" if fwd.mixer_bytes else "")))
    acc.span("non_torch", E.VLLM_NON_TORCH_TP if tp > 1 else E.VLLM_NON_TORCH,
             formula="non-torch allocations counted in the pool (NCCL buffers with TP, cuBLAS)")
    acc.span("cuda_graphs", E.VLLM_CUDA_GRAPHS, formula="CUDA graph pool, deducted from the KV pool (vLLM "
             f"{E.CURRENT_VERSION['vllm']})")
    non_torch = (E.VLLM_NON_TORCH_TP if tp > 1 else E.VLLM_NON_TORCH).expected
    fixed = ctx.wb.total + act + non_torch + E.VLLM_CUDA_GRAPHS.expected
    share = kv_fraction_per_device(spec, tp, mla_latent=True) * ctx.kv_stage_share  # pipeline.py
    # a sliding layer keeps window - 1 + max_num_batched_tokens tokens and one spare block; a chunked-local one
    # (Llama 4) chunk + max_num_batched_tokens and no spare block (v1/kv_cache_interface.py SlidingWindowSpec,
    # ChunkedLocalAttentionSpec.max_memory_usage_bytes)
    extra = mnbt if spec.chunked_attention else mnbt - 1
    slide_block = _unified_sliding_block(ctx, block)
    kvc = kv_cache(spec, w.context, 1, ctx.kv_dtype, mla_mode="latent", indexer_cache=E.VLLM.dsa_indexer_cache,
                   latent_cache=E.VLLM.dsa_latent_cache,
                   window_extra=extra, block_size=block, sliding_block_size=slide_block)
    pads = _group_padding(ctx)
    # the empty slots of vLLM's KV cache groups (formulas/kv_groups.py eq. 3): one layer's worth of each kind per slot
    pad_kv = (pads["full"] * kvc.tokens_full * kvc.layer_bytes_per_token_full
              + pads["sliding"] * (kvc.tokens_sliding + (0 if spec.chunked_attention else slide_block))
              * kvc.layer_bytes_per_token_sliding)
    pad_kv_dev = per_device(math.ceil(pad_kv), share)
    # a pipeline stage's state pages: the whole model's x its share (pipeline.py kv_stage_share, eq. 8's g_s / g)
    pad_state_dev = math.ceil(pads["recurrent"] * page * ctx.kv_stage_share) if page is not None else 0
    one_seq = per_device(kvc.total_bytes + _sliding_spare_block(ctx, slide_block), share) + pad_kv_dev
    sizing = VllmSizing(mns, block, extra, slide_block, pads, pad_kv_dev, page, pad_state_dev, fixed)
    running, need, state = _at_load(ctx, sizing)
    state_one = state_item(ctx, 1, "device", page_per_device=page).bytes + pad_state_dev if page is not None else 0
    one_seq += state_one
    ctx.details.update({"kv_needed_bytes": need.bytes, "kv_bytes_per_sequence": one_seq, "running_cap": mns,
                        "running_cap_name": "max_num_seqs", "running_sequences": running})
    if state is not None:
        ctx.details.update({"recurrent_state_needed_bytes": state.bytes, "recurrent_state_bytes_per_sequence":
                            state_one})
    if w.memory is None:
        if spec.kv_cache_layers:
            acc.items.append(need)
        if state is not None:
            acc.items.append(state)
        total = fixed + need.bytes + (state.bytes if state is not None else 0)
        ctx.details["memory_needed"] = int(total / util) + context_span(w.gpu_runtime).expected
        acc.warnings.append(f"vLLM pre-allocates KV to fill {util:.0%} of GPU memory; give --memory to see what it "
                            f"admits. This workload needs a GPU of at least "
                            f"{format_bytes(ctx.details['memory_needed'])}")
        device_context(acc.items, acc.assumptions, w.gpu_runtime, formula="CUDA context, outside the vLLM pool")
        return
    # what this workload occupies of the pool (+ the context): the need plan and fit report beside the reservation
    ctx.details["workload_bytes"] = _workload_bytes(ctx, sizing, need, state)
    # vLLM's requested memory: gpu_memory_utilization x CUDA's total (vllm 0.19.1 vllm/v1/worker/utils.py:408-410
    # request_memory, MemorySnapshot.total_memory = torch.cuda.mem_get_info's total, vllm/utils/mem_utils.py:104),
    # below nvidia-smi's memory.total by the driver's reserve (common.py cuda_total)
    total = cuda_total(acc, w, "vLLM's pool, gpu_memory_utilization x MemorySnapshot.total_memory,")
    pool = vllm_pool_bytes(total, util)
    ctx.details["cuda_total_bytes"] = total  # what the pool is a share of (the verdict's words: vllm_pool_words)
    # what workload_bytes is compared with: the pool (gpu_memory_utilization x memory, eq. 1) + the CUDA context
    # outside it; the rest of the device is left free by vLLM whatever the load
    ctx.details["workload_budget_bytes"] = pool + context_span(w.gpu_runtime).expected
    # what vLLM holds per device once it has started: its pool and the CUDA context, never more than the card but for
    # a context larger than the 1 - utilization left (warned below); the device total exceeds it only when vLLM does
    # not start (kv_avail <= 0: the items are then what it would need with an empty pool)
    ctx.details["reserved_bytes"] = pool + context_span(w.gpu_runtime).expected
    kv_avail = pool - fixed
    admitted = max(kv_avail, 0) // one_seq if one_seq else 0
    # vLLM's blocks and its "GPU KV cache size" token figure (formulas/kv_groups.py eqs. 4-6, by release)
    blocks, tokens = (_reported_pool(ctx, kvc, kv_avail, block, slide_block, share, one_seq) if spec.kv_cache_layers
                      else (0, 0))
    ctx.details.update({"gpu_memory_utilization": util, "kv_pool_bytes": kv_avail, "kv_blocks": blocks, "kv_tokens": tokens,
                        "max_concurrency_at_context": int(admitted),
                        "admitted_sequences": int(min(admitted, mns)),
                        "running_sequences": running_sequences(w, mns, int(admitted))})
    # the figures above that read the concurrency, which ``vllm_at_concurrency`` re-derives at another one (not with a
    # recurrent state: the pool's item below quotes the running sequences' state)
    ctx.load = (sizing, int(admitted)) if state is None else None
    if not spec.kv_cache_layers:  # attention-free: the pool is whole-request state pages, not token blocks
        ctx.details["recurrent_state_pages"] = int(admitted)
    pool_what = f"{int(blocks)} blocks of {block} tokens" if spec.kv_cache_layers else "recurrent state pages"
    if state is not None:
        pool_what += f", incl. the recurrent state of the {int(admitted)} admitted sequences " \
                     f"({format_bytes(state_one)} each: {state.formula})"
    acc.items.append(Item("kv_cache", max(kv_avail, 0), "device",
                          formula=f"{util} x {format_bytes(total)} (CUDA's total) - weights - activations - "
                                  f"non_torch - cuda_graphs = {pool_what}",
                          source="vLLM gpu_worker.determine_available_memory (eq. 1 of estimate/inference/vllm.py)"))
    device_context(acc.items, acc.assumptions, w.gpu_runtime, formula="CUDA context, outside the vLLM pool")
    if kv_avail <= 0:  # no KV pool: vLLM raises at start-up (compose.py's verdict says it, as SGLang's no pool)
        ctx.details["pool_shortfall_bytes"] = int(-kv_avail)
        ctx.details["vllm_no_pool"] = (
            f"vLLM would fail at start-up: weights {format_bytes(ctx.wb.total)} + profiled activations "
            f"{format_bytes(act)} + non-torch and CUDA graphs {format_bytes(non_torch + E.VLLM_CUDA_GRAPHS.expected)} "
            f"= {format_bytes(fixed)} exceed its pool, {vllm_pool_words(total, util)}, by {format_bytes(-kv_avail)}, "
            "leaving no memory for KV blocks (\"No available memory for the cache blocks\": "
            "vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory @001cabc, on the KV memory "
            f"gpu_worker.determine_available_memory leaves); {no_pool_remedy(ctx.spec.num_heads)}")
        ctx.details["vllm_no_pool_remedy"] = no_pool_remedy(ctx.spec.num_heads)  # (fit may name a nearer one)
    elif admitted < 1:
        acc.warnings.append(f"vLLM would refuse to start: one sequence of {w.context} tokens needs "
                            f"{format_bytes(one_seq)} of KV but the pool holds {format_bytes(kv_avail)}")
    context = context_span(w.gpu_runtime).expected
    if context > total - pool:
        runtime = "CUDA" if w.gpu_runtime == "cuda" else f"{w.gpu_runtime} runtime"
        acc.warnings.append(f"the {runtime} context (~{format_bytes(context)}) may not fit the {1 - util:.0%} left "
                            "outside the vLLM pool")
    _unprofiled_scan(ctx, mnbt, act, fwd.residual_bytes, total - pool - context)


class VllmSizing(NamedTuple):
    """What ``compose_vllm`` sized that its figures at the workload's concurrency read (none of them reads the
    concurrency): max_num_seqs, the KV block, a sliding layer's extra tokens and block, the KV cache groups' padding
    slots and their bytes per sequence, a recurrent layer's state page and its padding, and the fixed bytes of eq. (1)
    (weights, profiled activations, non-torch, CUDA graphs)."""

    mns: int
    block: int
    extra: int
    slide_block: int
    pads: dict[str, int]
    pad_kv_dev: int
    page: int | None
    pad_state_dev: int
    fixed: float


def _at_load(ctx: Context, s: VllmSizing) -> tuple[int, Item, Item | None]:
    """The sequences vLLM runs at once of ``ctx.w.concurrency`` (common.py eq. R1 at max_num_seqs: what the
    scheduler runs with room for it) and the KV cache (and recurrent state) they need, the KV cache groups' empty
    slots included (formulas/kv_groups.py eq. 3)."""
    w = ctx.w
    running = running_sequences(w, s.mns)
    need = _padded(kv_item(ctx, w.context, running, "device", block=s.block, window_extra=s.extra,
                           sliding_block=s.slide_block), s.pad_kv_dev, running, s.pads, ("full", "sliding"))
    state = (_padded(state_item(ctx, running, "device", page_per_device=s.page), s.pad_state_dev, running, s.pads,
                     ("recurrent",)) if s.page is not None else None)
    return running, need, state


def _workload_bytes(ctx: Context, s: VllmSizing, need: Item, state: Item | None) -> int:
    """What the workload occupies of vLLM's pool, and the CUDA context outside it: eq. (1)'s fixed bytes and what
    the running sequences need."""
    return int(s.fixed + need.bytes + (state.bytes if state is not None else 0)
               + context_span(ctx.w.gpu_runtime).expected)


def vllm_at_concurrency(ctx: Context) -> None:
    """``compose_vllm``'s figures that read the concurrency, at ``ctx.w.concurrency``, written over those of a
    composition of the same workload at another concurrency (its details, items, assumptions and warnings copied
    into ``ctx``, with its ``ctx.load``): with a memory given and no recurrent state, compose_vllm reads the
    concurrency only in the sequences it runs (``_at_load``), what they need and occupy (``kv_needed_bytes``,
    ``workload_bytes``) and the sequences it runs within its pool (``running_sequences``, eq. R1 with the pool's
    room); its items, assumptions and warnings read none (a recurrent state's would: the pool's item quotes the
    running sequences' state, so no load is kept there). compose.py ``_estimate`` so composes a layout once for the
    concurrencies a rate's climb asks of it."""
    sizing, admitted = ctx.load
    _, need, state = _at_load(ctx, sizing)  # (no recurrent state: compose_vllm keeps no load with one)
    ctx.details["kv_needed_bytes"] = need.bytes
    ctx.details["workload_bytes"] = _workload_bytes(ctx, sizing, need, state)
    ctx.details["running_sequences"] = running_sequences(ctx.w, sizing.mns, admitted)


def _unprofiled_scan(ctx: Context, mnbt: int, act: int, residual: int, margin: int) -> None:
    """A full ``mnbt`` prefill's Mamba-2 scan, which the profile run skips (formulas/vllm_mixer_profile.py eq. V4):
    what it needs beyond the profiled activations (``vllm_unprofiled_scan_bytes``) comes out of the memory outside the
    pool, ``margin`` (the (1 - utilization) share less the CUDA context); warned where it exceeds it."""
    spec, tp = ctx.spec, ctx.w.tensor_parallel
    r = spec.recurrent
    if r is None or r.kind != "mamba2" or not spec.recurrent_layer_count:
        return
    ssm = kv_dtype_bytes(state_dtypes(ctx)[1])
    step = residual + vllm_mamba2_step_bytes(mnbt, r.num_heads, r.head_dim, r.d_state, r.n_groups, r.chunk_size,
                                             ctx.act_bytes, int(ssm), tp)
    over = step - act
    if over <= 0:
        return
    ctx.details["vllm_unprofiled_scan_bytes"] = int(over)
    if over > margin:
        ctx.acc.warnings.append(
            f"a prefill step of max_num_batched_tokens {mnbt} runs the Mamba-2 chunked scan, which vLLM's profile run "
            f"skips: its chunk states need {format_bytes(over)} beyond the profiled activations "
            f"(formulas/vllm_mixer_profile.py eq. V4, for the step's tokens as one sequence: each further sequence "
            f"adds its own chunks), more than the {format_bytes(max(margin, 0))} outside the KV "
            "pool (1 - gpu_memory_utilization, less the CUDA context): such a step may run out of memory; lower "
            "--max-num-batched-tokens or --gpu-memory-utilization")


def _layer_counts(spec: ModelSpec) -> dict[str, int]:
    """Layers per cache kind as vLLM groups them: "full", "sliding" (Llama 4's chunked-local layers included) over
    the layers caching K/V of their own, and "recurrent"."""
    own = spec.kv_cache_layer_types
    return {"full": own.count("full"), "sliding": own.count("sliding"), "recurrent": spec.recurrent_layer_count}


def _reported_pool(ctx: Context, kvc: KVCache, pool: int, block: int, slide_block: int, share: float,
                   one_seq: int) -> tuple[int, int]:
    """(num_blocks, tokens) of vLLM's KV pool of ``pool`` bytes per device as its start-up log reports them:
    "GPU KV cache size: N tokens" (formulas/kv_groups.py eqs. 4-6, vllm/v1/core/kv_cache_utils.py @001cabc1
    ``_report_kv_cache_config``, ``get_num_blocks``).

    One KV cache group (every layer of one kind): a block is ``block`` tokens in every layer. Several groups: a block
    is g pages of the unified page (``block`` tokens of the layer with the most bytes per token: a full layer; a
    recurrent hybrid's attention page, which its padded state page equals).

    The token figure depends on the release (estimate/engines.py ``VLLM_KV_SIZE_LOG_CONCURRENCY_SINCE``, the release
    of ``engine_version``, else the current one): from 0.21 int(max_concurrency x max_model_len), max_concurrency =
    num_blocks / the blocks of one request (``one_seq`` bytes per device; eq. 6); before, the blocks shared evenly
    among all G groups -- recurrent-state groups included -- at the smallest block size (Gemma 4: the full layers'
    ``block`` beside the sliding layers' ``slide_block``; a Mamba group's block is the whole max_model_len,
    mamba_cache_mode 'none'; eq. 5), one group's blocks x ``block``. Where the two differ the other is said in an
    assumption."""
    counts = _layer_counts(ctx.spec)
    groups = vllm_group_count(counts)
    if groups <= 1:  # one group: its block holds each layer's own page (UniformTypeKVCacheSpecs where they differ)
        page, g = max(int(kvc.bytes_per_token * share * block), 1), 1
        blocks = max(pool, 0) // page
        older, smallest = int(blocks * block), block
    else:
        per_layer = max(kvc.layer_bytes_per_token_full, kvc.layer_bytes_per_token_sliding)
        # one layer's page on this device; a pipeline stage's block is g_s of them (formulas/kv_groups.py eq. 8:
        # kv_stage_share = g_s / g), its whole-model group size g otherwise
        dev = kv_fraction_per_device(ctx.spec, ctx.w.tensor_parallel, mla_latent=True)
        page, g = int(block * per_layer * dev), round(vllm_group_size(counts) * ctx.kv_stage_share)
        sizes = ([block] if counts["full"] else []) + ([slide_block] if counts["sliding"] else []) \
            + ([ctx.w.context] if counts["recurrent"] else [])
        blocks = vllm_num_blocks(pool, page, g)
        smallest = min(sizes)
        older = vllm_reported_kv_tokens(blocks, groups, smallest)
        ctx.details["kv_cache_groups"] = groups
    per_request = math.ceil(one_seq / (page * g)) if page else 0
    newer = vllm_concurrency_kv_tokens(blocks, per_request, ctx.w.context)
    concurrency_rule = E.release("vllm", ctx.w.engine_version) >= E.VLLM_KV_SIZE_LOG_CONCURRENCY_SINCE
    tokens = newer if concurrency_rule else older
    if blocks and page and newer != older:
        since = ".".join(map(str, E.VLLM_KV_SIZE_LOG_CONCURRENCY_SINCE))
        concurrency = (f"int({blocks:,} blocks / {per_request:,} per request of {ctx.w.context:,} tokens x "
                       f"{ctx.w.context:,}) = {newer:,} tokens")
        shared = (f"{blocks:,} blocks of {g} pages // {groups} KV cache groups x the smallest block size, {smallest} "
                  f"tokens = {older:,} tokens" if groups > 1 else f"{blocks:,} blocks x {block} = {older:,} tokens")
        why = (f"vLLM's \"GPU KV cache size\" line from vLLM {since} on: {concurrency} (max concurrency x "
               f"max_model_len, kv_cache_utils.py _report_kv_cache_config / get_kv_cache_capacity; "
               f"{VLLM_KV_SIZE_LOG_SOURCE}); vLLM 0.19-0.20 print {shared} (@001cabc1)" if concurrency_rule else
               f"vLLM's \"GPU KV cache size\" line as vLLM before {since} print it: {shared} (kv_cache_utils.py "
               f"@001cabc1 _report_kv_cache_config); vLLM {since} and later print max concurrency x max_model_len "
               f"instead, {concurrency} ({VLLM_KV_SIZE_LOG_SOURCE})")
        ctx.acc.assumptions.append(Assumption("vllm_kv_size_log", tokens, True, why))
    return blocks, tokens


VLLM_KV_SIZE_LOG_SOURCE = ("the switch-over release: estimate/engines.py VLLM_KV_SIZE_LOG_CONCURRENCY_SINCE, "
                           "after vllm-project/vllm#40691 (0.19.0) and before #42206; formulas/kv_groups.py eqs. 5-6")


def _group_padding(ctx: Context) -> dict[str, int]:
    """The empty slots vLLM's KV cache groups add to each cache kind of this model ("full", "sliding" -- Llama 4's
    chunked-local layers included -- and "recurrent"): formulas/kv_groups.py eqs. (1)-(2) over the layers caching
    K/V of their own and the recurrent layers; said as an assumption where any."""
    spec = ctx.spec
    counts = _layer_counts(spec)
    pads = vllm_padding_slots(counts)
    if any(pads.values()):
        g = vllm_group_size(counts)
        kinds = {"full": "full-attention", "sliding": "chunked-local" if spec.chunked_attention else "sliding-window",
                 "recurrent": "recurrent-state"}
        what = ", ".join(f"{n} {kinds[k]} layers" for k, n in counts.items() if n)
        empty = ", ".join(f"{p} {kinds[k]}" for k, p in pads.items() if p)
        ctx.acc.assumptions.append(Assumption(
            "vllm_kv_group_padding", sum(pads.values()), True,
            f"vLLM puts the {what} in KV cache groups of {g} layers each and pads the last group of a kind, so each "
            f"request also holds {empty} empty slot(s) of that kind's size ({VLLM_KV_GROUPS_SOURCE})"))
        ctx.details.update({"kv_group_size": g, "kv_group_padding_slots": sum(pads.values())})
    return pads


VLLM_KV_GROUPS_SOURCE = ("vllm/v1/core/kv_cache_utils.py @001cabc1 _get_kv_cache_groups_uniform_page_size, "
                         "get_kv_cache_config_from_groups; formulas/kv_groups.py")


def _padded(item: Item, per_seq: int, seqs: int, pads: dict[str, int], kinds: tuple[str, ...]) -> Item:
    """``item`` with the padding slots of ``kinds`` (``per_seq`` bytes per sequence per device) added for ``seqs``
    sequences."""
    n = sum(pads[k] for k in kinds)
    if not n or not per_seq:
        return item
    return replace(item, bytes=item.bytes + per_seq * seqs,
                   formula=item.formula + f"; + {n} empty slot(s) of vLLM's KV cache groups x {seqs} seqs "
                                          f"({format_bytes(per_seq)} each)",
                   source=item.source + "; " + VLLM_KV_GROUPS_SOURCE)


def _sliding_spare_block(ctx: Context, block: int) -> int:
    """SlidingWindowSpec reserves one extra block per sliding layer and request."""
    n_sliding = ctx.spec.kv_cache_layer_types.count("sliding")
    if not n_sliding or ctx.spec.chunked_attention:
        return 0
    kvc = kv_cache(ctx.spec, 1, 1, ctx.kv_dtype, mla_mode="latent", indexer_cache=E.VLLM.dsa_indexer_cache,
                   latent_cache=E.VLLM.dsa_latent_cache)
    per_layer_token = (kvc.layer_bytes_per_token_sliding if ctx.spec.full_head_dim  # Gemma 4: the sliding layers' own
                       else kvc.bytes_per_token / ctx.spec.kv_cache_layers)
    return math.ceil(n_sliding * block * per_layer_token)


# vLLM's KV cache manager allocates pages of one size (vllm/v1/core/kv_cache_utils.py @001cabc1 get_kv_cache_groups:
# layers of several attention types go through unify_kv_cache_spec_page_size, then
# _get_kv_cache_groups_uniform_page_size): a layer whose page (block_size x its bytes per token) is smaller than the
# largest gets its block_size multiplied by max_page // its page when that divides, so its page equals the largest;
# each layer still holds its own bytes per token, in blocks of more tokens. Gemma 4's sliding layers (head 256)
# beside its full ones (global_head_dim 512): 32-token blocks at block_size 16.
VLLM_PAGE_UNIFY_SOURCE = ("vllm/v1/core/kv_cache_utils.py @001cabc1 get_kv_cache_groups -> "
                          "unify_kv_cache_spec_page_size (block_size x max_page // page)")


def _unified_sliding_block(ctx: Context, block: int) -> int:
    """The tokens of a sliding layer's block under vLLM's one page size (:data:`VLLM_PAGE_UNIFY_SOURCE`): ``block``
    where every layer's page is the same; ``block x full page // sliding page`` where the full layers' page is a
    multiple of the sliding layers' (Gemma 4); else ``block``, warned (formulas/kv_groups.py eq. 7: vLLM @001cabc1
    refuses the model, newer releases pad the sliding page to the full one).
    The sliding window's tokens and its spare block are counted in those blocks."""
    spec = ctx.spec
    own = spec.kv_cache_layer_types
    if not spec.full_head_dim or spec.mla is not None or "sliding" not in own or "full" not in own:
        return block
    kvc = kv_cache(spec, 1, 1, ctx.kv_dtype, mla_mode="latent", indexer_cache=E.VLLM.dsa_indexer_cache,
                   latent_cache=E.VLLM.dsa_latent_cache)
    full, slide = kvc.layer_bytes_per_token_full, kvc.layer_bytes_per_token_sliding
    if full == slide:
        return block
    full_page, slide_page = math.ceil(block * full), math.ceil(block * slide)
    new, padded = vllm_unified_block(slide_page, full_page, block)
    if padded:  # formulas/kv_groups.py eq. (7): a per-token-head scale (kv_cache.py eq. 5) breaks the 2:1 ratio
        ctx.acc.warnings.append(
            f"vLLM unifies the KV page size across layers, and the full layers' page ({block} tokens x {full:g} B = "
            f"{full_page:,} B) is not a multiple of the sliding layers' ({slide_page:,} B): vLLM @001cabc1 refuses the "
            f"model at start-up (NotImplementedError, \"Cannot unify by adjusting block_size\"); newer releases pad "
            f"each sliding page to {full_page:,} B where the attention backend indexes pages by the block stride, "
            f"{full_page / slide_page - 1:.0%} more bytes for the sliding layers' KV, else refuse too "
            f"({VLLM_PAGE_UNIFY_SOURCE}; formulas/kv_groups.py eq. 7); sized unpadded, with {block}-token blocks for "
            "both")
        return block
    if new == block:  # a sliding page at least the full one's: not Gemma 4's layout, nothing to unify here
        return block
    ctx.acc.assumptions.append(Assumption(
        "vllm_sliding_block_size", new, True,
        f"vLLM gives every layer one page size: a sliding layer ({slide:g} B per token) holds {new} tokens per block "
        f"so its page equals a full layer's ({block} tokens x {full:g} B); its window and spare block are counted "
        f"in such blocks ({VLLM_PAGE_UNIFY_SOURCE})"))
    ctx.details["sliding_block_size"] = new
    return new


def _hybrid_pages(ctx: Context, block: int) -> tuple[int, int]:
    """(attention block size, padded state page per recurrent layer, sequence and GPU) of vLLM's hybrid allocator.

    vLLM sizes both pages on one GPU (vllm-project/vllm@1936cf3841edb9781b06c50fc4daf4bac9d3b23e
    vllm/model_executor/models/config.py ``HybridAttentionMambaModelConfig.verify_and_update_config``; newer:
    vllm/platforms/interface.py ``_align_hybrid_block_size``): the attention page of one token holds
    ``model_config.get_num_kv_heads(parallel_config)`` = max(1, kv_heads // tp) KV heads, the Mamba page the state
    shapes of this GPU's shard (``get_mamba_state_shape_from_config``: formulas/recurrent_state.py eq. 4)::

        attn_block = align x ceil(state_page_gpu / (align x attn_bytes_per_token_gpu))
        page       = max(block_size, attn_block) x attn_bytes_per_token_gpu   (the state page padded to it)

    align = max(kernel alignment, block_size) (estimate/engines.py VLLM_KERNEL_BLOCK_ALIGNMENT). A model without
    attention keeps its state pages unpadded."""
    spec, tp = ctx.spec, ctx.w.tensor_parallel
    conv, ssm = state_dtypes(ctx)
    state_page = layer_state_bytes_per_device(spec, tp, kv_dtype_bytes(conv), kv_dtype_bytes(ssm),
                                              ctx.profile.conv_state_window)
    if not spec.kv_cache_layers:
        return block, math.ceil(state_page)
    share = kv_fraction_per_device(spec, tp, mla_latent=True)  # one layer's page: no pipeline stage's share here
    attn_1tok = kv_cache(spec, 1, 1, ctx.kv_dtype, mla_mode="latent").bytes_per_token / spec.kv_cache_layers * share
    align = max(E.VLLM_KERNEL_BLOCK_ALIGNMENT, block)
    hybrid_block = align * math.ceil(state_page / (align * attn_1tok))
    new_block = max(block, hybrid_block)
    gpu = " on each GPU" if tp > 1 else ""
    if new_block != block:
        ctx.acc.warnings.append(f"vLLM's hybrid allocator sets the attention block size to {new_block} tokens so that "
                                f"one attention page holds one recurrent state page ({format_bytes(state_page)}{gpu})")
    ctx.details["hybrid_block_size"] = new_block
    return new_block, math.ceil(new_block * attn_1tok)
