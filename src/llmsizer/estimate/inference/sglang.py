"""Engine profile 'sglang': a token pool sized from ``--mem-fraction-static``.

Rules read in SGLang 0.5.23 (the PyPI wheel; line numbers of that release):

(1) ``mem_fraction_static`` default (sglang/srt/arg_groups/memory_hook.py:90-160, 289-339). From the GPU's total
    memory ``M`` [MiB] (nvidia-smi's memory.total: srt/utils/common.py get_nvgpu_memory_capacity, the catalog's
    memory, not CUDA's total): the tier gives ``chunked_prefill_size`` and the decode CUDA-graph ``max_bs``
    (engines.SGLANG_TIERS); then

        reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + tp x pp / 8 x 1024
                   + 2 x max_bs + 8 x (prefill graph sizes)          [1.5 GiB instead with MLA]
        reserved = max(reserved, 10240) when M > 60 GiB
        mem_fraction_static = round((M - reserved) / M, 3)                                           (1)

    The prefill graph sizes are the capture list of cuda_graph_hook.py:480-497 up to chunked_prefill_size (the
    breakable prefill graph is the CUDA default, model_executor/cuda_graph_config.py:119-123).
(1v) A multimodal model (``is_vlm``, memory_hook.py:281-337) gets that default times SGLang's vision-encoder
    factor, formulas/vlm_memory_fraction.py eqs. (V1)-(V3): 0.95 x clamp(1 - 0.1 (L_vit H_vit^2 / (24 x 1024^2) - 1),
    0.8, 1.05), with the ``num_hidden_layers`` and ``hidden_size`` SGLang reads from the vision config
    (``sglang_vlm_shape``); only where no --mem-fraction-static is given.
(2) Token pool (mem_cache/kv_cache_configurator.py:2990-3060): with ``pre`` the free memory before the weights
    are loaded (CUDA's total - CUDA context - with TP NCCL's buffers: distributed/bootstrap.py:193-216 measures it
    after the parallel groups are set up; torch.cuda.mem_get_info's free, so of CUDA's total, below the nvidia-smi
    memory.total eq. (1)'s M is: the workload's ``cuda_memory``, common.py ``cuda_total``), ``rest = (pre - weights) - pre x (1 - mem_fraction_static)``, i.e.

        kv_pool = mem_fraction_static x pre - weights                                                (2)

(3) ``max_total_num_tokens = kv_pool // cell_size // page_size x page_size`` (model_executor/pool_configurator.py:
    636-647) with ``cell_size = kv_heads per rank x (head_dim + v_head_dim) x layers x dtype bytes``
    (pool_configurator.py:492-498), the MLA latent for DeepSeek-style models; page_size 1, but 64 for a DeepSeek DSA
    model on CUDA and for DeepSeek-V3 under trtllm_mla and GPT-OSS under trtllm_mha on compute capability 10.x
    (engines.py sglang_page_size), each request then holding ceil(tokens / page_size) pages (utils/common.py:
    4859-4861).
(4) ``max_running_requests = min(max(min(tokens / context_len x 512, 4096), 2048), tokens // 2)``
    (kv_cache_configurator.py:3119-3132), context_len = the model's context length.
(4b) Hybrid models (Mamba / Gated DeltaNet layers; mem_cache/kv_cache_configurator.py:3039-3040 calls
    _handle_max_mamba_cache, :3229-3409): before the token pool is sized, a per-request recurrent-state pool
    (MambaPool) takes its share of eq. (2)'s rest, split by ``--mamba-full-memory-ratio`` r (fallback 0.9,
    arg_groups/fields/schedule.py:220-227); without speculative decoding (:3346-3386):

        max_mamba_cache_size = int((rest x r / (1 + r) - mamba_cache_per_req) // mamba_cache_per_req)
        kv_pool              = rest - (max_mamba_cache_size + 1) x mamba_cache_per_req                      (2b)

    (+1: each pool's padding slot, :3404-3409). ``mamba_cache_per_req`` = (conv (conv_kernel - 1 columns, bf16)
    + SSM state (float32 unless the config's or SGLANG_MAMBA_SSM_DTYPE's mamba_ssm_dtype says otherwise)) x
    recurrent layers (configs/mamba_utils.py:47-125, 225, 276): the helper of formulas/recurrent_state.py with the
    profile's dtypes; only the full-attention layers are in ``cell_size``. The running requests are then capped
    (resolve_max_num_reqs, :3119-3150):

        max_running_requests = min(eq. (4), max_mamba_cache_size // s)                                  (4b)

    Which terms of eqs. (4)/(4b) are a running cap and which the pools' room (probe20 D1): the given
    --max-running-requests, else eq. (4)'s estimate clamped to [2048, 4096] (constants: no pool's size), is the
    configured cap (``running_cap``: requests above it wait in the queue, and it fits); tokens // 2 and
    max_mamba_cache_size // s come from memory (the token pool, eq. 2b's MambaPool) and are the pools' room
    (``max_concurrency_at_context`` = min(tokens // context, tokens // 2, max_mamba_cache_size // s), the bound that
    binds in ``admits_bound``): more sequences at once than that do not fit, as past vLLM's KV pool room
    (compose.py _check_fit, common.py eq. R1). SGLang logs the MambaPool's bound whenever it is below the others
    (resolve_max_num_reqs' capped_by_mamba, :3138-3150): warned the same.

    with s the state slots per running request (_calculate_mamba_ratio :3062-3088, radix cache on,
    SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK off): MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO 3 (:227) plus the radix
    cache's extra-buffer tracking slots (get_mamba_tracking_slots, mem_cache/allocation_sizing.py:11-19): s = 3 with
    no_buffer, 3 + 2 = 5 with extra_buffer and the overlap scheduler, 3 + 1 = 4 with extra_buffer_lazy. SGLang's
    --mamba-radix-cache-strategy "auto" (arg_groups/fields/exec_.py:512-519) resolves to extra_buffer for the
    architectures of _MAMBA_EXTRA_BUFFER_ARCHS (arg_groups/overrides.py:403-433, _mamba_radix_cache_resolution
    :453-487: Qwen3-Next, Nemotron-H, Falcon-H1, Granite-4.0-H with "mamba" layers) with the overlap scheduler on
    (its default, fields/schedule.py:193-199) and the default linear_attn_backend triton, else to no_buffer
    (``SGLANG_MAMBA_EXTRA_BUFFER`` below; pure Mamba models: no extra buffer; Jamba, which SGLang 0.5.23 does not
    serve, is refused: model_warnings.ENGINE_LACKS_MODEL). The MambaPool's size and
    memory (eq. 2b) are the same under every strategy: the extra buffer's slots come out of the same
    max_mamba_cache_size (memory_pool.py:1393-1400, 1753-1771), its per-request index map (req_pool_size x 2 int64,
    :1523-1530) is not counted. With the overlap scheduler off (``disable_overlap_schedule``, SGLang's
    --disable-overlap-schedule) auto resolves to no_buffer for those architectures (:484-486), an explicit
    extra_buffer holds 3 + 1 = 4 (allocation_sizing.py:19), and SGLang stops at start for extra_buffer_lazy
    (kv_cache_configurator.py:3073-3076); with it on, for an explicit no_buffer (mamba_hook.py:156-160): both refused.
    With the radix cache off (``disable_radix_cache``) no strategy is resolved (overrides.py:473-474) nor buffer kept
    (model_override_base.py:260-265) and s = 1 (kv_cache_configurator.py:3063-3064); a strategy given with it is
    refused (not read). Not modelled (pipeline parallelism of a hybrid is refused, estimate/inference/pipeline.py):
    pipeline parallelism (which turns the overlap scheduler off after the strategy is resolved:
    arg_groups/pipeline.py:302, s = 4), page_size > 1 of a Mamba hybrid (sm100 backends), SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK
    (base 2, :3066-3068).
    ``--max-mamba-cache-size`` K (arg_groups/fields/schedule.py:216-219, an int, unset by default) replaces the
    split: ``if max_mamba_cache_size is not None`` (:3303-3307) takes K as it is and the ratio is not read (its
    ``else`` branch, :3346-3386), so

        max_mamba_cache_size = K;  kv_pool = rest - (K + 1) x mamba_cache_per_req                         (2b')

    with eq. (4b)'s cap K // s unchanged (resolve_max_num_reqs reads the same field, :3135-3137; no clamp of K
    against --max-running-requests without speculative decoding, :3308-3322). With the radix cache disabled and
    --max-running-requests M given (and no K), the pool is one slot per running request, no ratio read
    (:3325-3335, attention data parallelism 1):

        max_mamba_cache_size = max(1, M);  kv_pool = rest - (M + 1) x mamba_cache_per_req                   (2b'')

    and eq. (4b)'s cap is M // 1 = M (a ratio given with both is refused: not read). A K whose pool leaves nothing of rest
    stops SGLang ("Loaded weights leave no GPU memory for the KV cache", :3039-3058); K <= 0 also (:3392-3402), and a
    ratio r <= 0 leaves the split no slot: both refused as inputs (numbers.py COUNT, MEMORY_RATIO). Only one of the
    two is read, so giving both is refused (specs/workload.py). Not modelled: speculative decoding's intermediate
    states, attention data parallelism (K // attn_dp_size per shard, :3306), pipeline parallelism's per-stage share (refused
    for a hybrid: estimate/inference/pipeline.py).
(3m) A model with no attention layer (a pure Mamba-2 / Mamba model: Mamba2ForCausalLM, MambaForCausalLM,
    FalconMambaForCausalLM are served, models/mamba2.py:178-262, models/mamba.py:28-33, configs/model_config.py:
    156-164 PURE_SSM_ARCHITECTURES) takes eq. (2b) as a hybrid does (its config is mambaish: configs/hybrid_arch.py:
    70-92, 145-155; _handle_max_mamba_cache as above), but its token pool has no layer: configs/mamba2.py:36-38
    full_attention_layer_ids = [], so cell_size = 0 (pool_configurator.py:229-236) and

        max_total_num_tokens = (--max-total-tokens or context_len) // page_size x page_size              (3m)

    (pool_configurator.py:240-250 _zero_kv_max_tokens, 637-647). The running requests' tokens are allocated from
    that pool (admission reads the allocator's free tokens: mem_cache/prefill_budget.py:62-131 PrefillBudget), so
    together they hold at most context_len tokens: tokens // context sequences at once; eq. (4) gives
    min(2048, context_len // 2) and eq. (4b) caps it at max_mamba_cache_size // 3. The rest eq. (2b) leaves
    (rest / (1 + r)) is not allocated. context_len is the derived window: 2048 for a config with no length key
    (estimate/context_window.py eq. W3; Mamba-Codestral has none). The req_to_token map ((max_running_requests + 1)
    x context_len int32, kv_cache_configurator.py:1718-1722) is not counted, as for every model.
(3s) Sliding-window models (SGLang 0.5.23 configs/model_config.py:1213-1256 _derive_hybrid_model): a model is
    "hybrid SWA" when its architecture is in is_hybrid_swa_model's list (model_config.py:2651-2697: GPT-OSS via
    SWA_SINK_ARCHS :88-96, Llama4ForConditionalGeneration, Gemma 4, MiMo-V2, Step-3.5, ...) and
    ``disable_hybrid_swa_memory`` is off. Gemma 2, Gemma 3 and Gemma 3n are not in the list, and SGLang also turns
    the flag on for them (arg_groups/model_overrides/gemma2_gemma3.py:13-26, "Disable hybrid SWA memory ... as it is
    not yet supported"; Exaone 4 with a sliding_window_pattern: exaone.py:15-22; Olmo2ForCausalLM: olmo2.py:15-23, the
    override at :23), as does
    ``--disable-hybrid-swa-memory`` (arg_groups/fields/schedule.py:182-184) for any model. Those models, and every
    other one with sliding layers (Mistral v0.1, Phi-3), get the one token pool of eq. (3): every layer holds every
    token of a sequence, sliding or not (``SWA_KV_POOL`` below says which family gets which). A hybrid SWA model
    gets two pools from eq. (2)'s budget (model_executor/pool_configurator.py:656-921 HybridSWAPoolConfigurator,
    picked by create_memory_pool_configurator :1715-1725; formulas/swa_pool.py eqs. S1-S5):

        full_tokens = kv_pool // (B_full + swa_full_tokens_ratio x B_swa);  swa_tokens = full_tokens x ratio    (3s)

    B_full = kv_heads per rank x (head_dim + v_head_dim) x full layers x dtype bytes, B_swa the same over the
    sliding layers with the sliding layers' own swa_head_dim / swa_num_key_value_heads (:703-716; Gemma 4 states
    them per kind: utils/hf_transformers/config.py:115-145 _apply_gemma4_attention_overrides gives the full layers
    global_head_dim and the sliding ones head_dim; the SWA pool is built with them, mem_cache/
    kv_cache_configurator.py:2508-2518, memory_pool.py:2234-2235), ratio 0.8 by default (--swa-full-tokens-ratio,
    schedule.py:150-162). The layer counts are every layer of each kind (pool_configurator.py:666-667 from
    get_hybrid_layer_ids, model_config.py:2700-2766), KV-sharing layers included: SWAKVPool gives each listed layer
    its own buffer (mem_cache/swa_memory_pool.py:54-56, 96-107) though Gemma 4's shared layers never write it
    (models/gemma4_causal.py:397-416, 540). Llama 4: the chunked-attention layers (i + 1) % 4 != 0 are the SWA
    pool's, the rest the full pool's (model_config.py:2705-2711). max_total_num_tokens = full_tokens (eq. 4 reads
    it); a sequence of t tokens holds t full-pool tokens and min(t, w + 128 + 2) SWA tokens (S4), w the window the
    scheduler evicts by (model_runner.py:1353, load_model_utils.py:144-157): the model's
    get_attention_sliding_window_size where it has one, sliding_window - 1 for GPT-OSS (models/gpt_oss.py:131-132)
    and Gemma 4 (models/gemma4_mm.py:314-315, gemma4_causal.py:83-84), else attention_chunk_size (Llama 4: no
    sliding_window in its config, so _get_sliding_window_size :1961-1966 is None); ``SGLANG_SWA_WINDOW`` below. An
    SWA pool of no more than w + page tokens stops SGLang at start (validate_swa_pool_size :198-216, given the
    runner's window w above: attention_chunk_size for Llama 4); none is admitted then. With the radix cache disabled
    (``disable_radix_cache``) and --max-running-requests M given, SGLang sizes the SWA pool from M instead
    (SWARequestCapPoolConfigurator :971-1042, applicable :986-1003 with a positive chunked_prefill_size and a
    runner window: kvc.sliding_window_size, the same w as above, model_runner.py:669 passes the runner's, so Llama 4's
    attention_chunk_size counts too; compute_swa_request_cap :924-968 with window=kvc.sliding_window_size :982;
    formulas/swa_pool.py S6, S7):

        swa_tokens = (w + 128 + 2 x page) x M + c x chunked_prefill_size + page;
        full_tokens = (kv_pool - swa_tokens x B_swa) // B_full                                               (3s')

    c = 2 chunks in flight with the overlap scheduler, 1 without (:963); full_tokens <= 0 stops SGLang at start
    (:1024-1031). Such a pool has room for M sequences of the context (each holding S4's tokens): the chunks in
    flight and the page are the chunked prefill's (the verdict names the SWA pool where that binds). Not modelled: DeepSeek V4's pool, unified memory.
(5) Radix cache: finished requests' KV stays in the same pool as a prefix cache and is evicted (LRU) when running
    requests need the room, so it does not lower the capacity for running requests; requests that share a prefix
    hold it once. With the hybrid SWA pool the tree indexes both pools (mem_cache/registry.py:159-170:
    UnifiedRadixCache with the FULL and SWA components) and evicts from each the same way.

Why vLLM reports a different capacity for the same card: vLLM's pool is ``gpu_memory_utilization x total - weights
- profiled activation peak - non-torch - CUDA graphs`` (vllm.py eq. 1), SGLang's is eq. (2): a different fraction
(0.9 against eq. (1)'s tiered value), applied to the memory free before loading, with activations and graphs left
to the fraction's remainder instead of being measured and subtracted.
"""

from __future__ import annotations

import math
from typing import Any

from ...errors import FieldError
from ...formulas.kv_cache import (
    ds_mla_bytes_per_token_layer,
    indexer_bytes_per_token_layer,
    kv_cache,
    kv_dtype_bytes,
    paged_tokens,
)
from ...formulas.recurrent_state import layer_state_bytes_per_device
from ...formulas.swa_pool import (
    hybrid_swa_admitted,
    hybrid_swa_pool_tokens,
    swa_request_cap_pool_tokens,
    swa_tokens_held,
)
from ...formulas.tensor_parallel import kv_fraction_per_device, per_device
from ...formulas.vlm_memory_fraction import vlm_fraction_factor, vlm_mem_fraction_static
from ...result import Assumption, Item
from ...specs import ModelSpec
from ...units import MiB, format_bytes
from .. import engines as E
from ..allocator import context_span, device_context
from ..context_window import engine_window
from ..verdict import MAMBA_POOL, SWA_POOL, vllm_pool_words
from .common import Context, cuda_total, kv_item, running_sequences, state_dtypes, weights_item


def prefill_graph_sizes(max_bs: int) -> list[int]:
    """The prefill CUDA-graph capture sizes up to ``max_bs`` tokens (cuda_graph_hook.py:480-497)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


def default_mem_fraction_static(total_bytes: int, tp: int = 1, mla: bool = False,
                                chunked_prefill_size: int | None = None) -> tuple[float, dict[str, Any]]:
    """Eq. (1): SGLang's default ``mem_fraction_static`` for a GPU of ``total_bytes`` and its parts [MiB]."""
    gpu_mem = total_bytes / MiB
    tier = next(t for t in E.SGLANG_TIERS if gpu_mem < t[0])
    chunked = chunked_prefill_size or tier[1]
    max_bs = tier[2] if tp < 4 else tier[3]
    activation = E.SGLANG_ACTIVATION_MIB_PER_TOKEN * max(chunked, E.SGLANG_MIN_ACTIVATION_TOKENS)
    prefill_max = min(8192, chunked) if mla else chunked
    graphs = E.SGLANG_DECODE_GRAPH_MIB_PER_BS * max_bs + (
        E.SGLANG_PREFILL_GRAPH_MLA_MIB if mla else E.SGLANG_PREFILL_GRAPH_MIB_PER_SIZE * len(prefill_graph_sizes(prefill_max)))
    reserved = E.SGLANG_RESERVED_FLOOR_MIB + activation + tp * E.SGLANG_TP_MIB + graphs
    if gpu_mem > E.SGLANG_BIG_GPU_MIB:
        reserved = max(reserved, E.SGLANG_BIG_GPU_MIN_RESERVED_MIB)
    return round((gpu_mem - reserved) / gpu_mem, 3), {
        "gpu_mem_mib": gpu_mem, "chunked_prefill_size": chunked, "decode_graph_max_bs": max_bs,
        "reserved_mib": reserved, "activation_mib": activation, "graphs_mib": graphs}


def sglang_vlm_shape(spec: ModelSpec) -> tuple[int, int, str] | None:
    """Eq. (1v)'s vision encoder as SGLang 0.5.23 reads it: (num_hidden_layers, hidden_size, why), or None where
    SGLang makes no multimodal reduction (a text-only model; Gemma 3 and Llama 4, whose multimodal input SGLang turns
    off by default: configs/model_config.py:690-702 mm_disabled_models, so ``is_multimodal`` is False)."""
    if spec.gemma4 is not None and spec.gemma4.vision is not None:
        t = spec.gemma4.vision  # Gemma4VisionConfig names num_hidden_layers (transformers 5.19.0 L275)
        return t.num_layers, t.hidden_size, "the vision config's num_hidden_layers and hidden_size"
    v = spec.vision
    if v is None or v.encoder in ("siglip", "llama4"):
        return None
    if v.encoder in ("qwen2_5_vl", "qwen3_vl"):
        # the Qwen VL vision configs name their depth ``depth``, with no num_hidden_layers alias in transformers
        # 5.19.0, SGLang 0.5.23's pin (Qwen2_5_VLVisionConfig / Qwen3VLVisionConfig attribute_map holds only
        # num_attention_heads): getattr's default 24 is read (memory_hook.py:440)
        # transformers >= 5.24 adds the alias (review34 N2: depth is then read, a smaller factor), so the text names
        # the version this default assumes
        return (24, v.hidden_size, f"the vision config has depth {v.num_layers} but no num_hidden_layers under "
                "transformers 5.19.0 (SGLang 0.5.23's pin, assumed; transformers 5.24 adds the alias, and SGLang then "
                f"reads depth {v.num_layers}), so SGLang reads its default 24 (memory_hook.py:440)")
    # Gemma 4's and mllama's vision configs name num_hidden_layers (mllama's: the local encoder; its global layers
    # are not read)
    return v.num_layers, v.hidden_size, "the vision config's num_hidden_layers and hidden_size"


# Which KV pool SGLang 0.5.23 gives each family with sliding-window layers (by the config's model_type): "hybrid"
# (two pools, eq. 3s) or "one" (the one pool of eq. 3: every layer holds every token). A family not listed is
# "one_assumed": SGLang decides on the config's architectures (is_hybrid_swa_model's list, model_config.py:2651-2697,
# with SWA_SINK_ARCHS :88-96: GraniteSWA, MiMo-V2, Step-3.5, Laguna, Beam ...) or its is_hybrid_swa opt-in
# (:2693-2695), which this table has not read for it: the one pool, assumed, with a warning (review21 D9: it was
# stated as a fact).
_ONE_POOL_OVERRIDE = ("SGLang turns disable_hybrid_swa_memory on for it (arg_groups/model_overrides/gemma2_gemma3.py:"
                      "13-26: Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration, Gemma3n*)")
SWA_KV_POOL: dict[str, tuple[str, str]] = {
    "gpt_oss": ("hybrid", "GptOssForCausalLM is in SWA_SINK_ARCHS (configs/model_config.py:88-96), so "
                          "is_hybrid_swa_model (:2651-2697) is true; sliding and full layers from layer_types "
                          "(get_hybrid_layer_ids :2700, :2712-2722)"),
    "llama4": ("hybrid", "Llama4ForConditionalGeneration is in is_hybrid_swa_model's list (model_config.py:2657); "
                         "its chunked-attention layers ((i + 1) % 4 != 0) go to the SWA pool, every 4th to the full "
                         "pool (get_hybrid_layer_ids :2705-2711), evicted by attention_chunk_size "
                         "(load_model_utils.py:152-155)"),
    "gemma4": ("hybrid", "Gemma4ForConditionalGeneration is in is_hybrid_swa_model's list (model_config.py:2668); "
                         "sliding and full layers from layer_types (:2752-2766), each kind with its own head size "
                         "(utils/hf_transformers/config.py:115-145), KV-sharing layers keeping a buffer "
                         "(swa_memory_pool.py:96-107)"),
    "gemma4_text": ("hybrid", "Gemma4ForCausalLM is in is_hybrid_swa_model's list (model_config.py:2667); sliding "
                              "and full layers from layer_types (:2752-2766), each kind with its own head size "
                              "(utils/hf_transformers/config.py:115-145), KV-sharing layers keeping a buffer "
                              "(swa_memory_pool.py:96-107)"),
    "gemma2": ("one", _ONE_POOL_OVERRIDE),
    "gemma3": ("one", _ONE_POOL_OVERRIDE),
    "gemma3_text": ("one", _ONE_POOL_OVERRIDE),
    "gemma3n": ("one", _ONE_POOL_OVERRIDE),
    "gemma3n_text": ("one", _ONE_POOL_OVERRIDE),
    "exaone4": ("one", "SGLang turns disable_hybrid_swa_memory on for Exaone 4 with a sliding_window_pattern "
                       "(arg_groups/model_overrides/exaone.py:15-22)"),
    "olmo3": ("one", "Olmo3ForCausalLM is not in is_hybrid_swa_model's list (model_config.py:2651-2697)"),
    "mistral": ("one", "MistralForCausalLM is not in is_hybrid_swa_model's list (model_config.py:2651-2697) nor "
                       "SWA_SINK_ARCHS (:88-96)"),
    "phi3": ("one", "Phi3ForCausalLM is not in is_hybrid_swa_model's list (model_config.py:2651-2697) nor "
                    "SWA_SINK_ARCHS (:88-96)"),
}


# Eq. (4b)'s state slots per running request (SGLang 0.5.23 _calculate_mamba_ratio, mem_cache/kv_cache_configurator.py:
# 3062-3088): MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (3, :227) plus, with the radix cache's extra buffer, the
# ping-pong tracking slots each running request also takes from the MambaPool (get_mamba_tracking_slots,
# mem_cache/allocation_sizing.py:11-19: 2 with the overlap scheduler, 1 without it or lazy; memory_pool.py:1393-1400,
# 1753-1771 _alloc_ping_pong_buffer). The families (by the config's model_type) whose architecture SGLang gives the
# extra buffer by default: _mamba_radix_cache_resolution (arg_groups/overrides.py:453-487) resolves the strategy
# "auto" (fields/exec_.py:512-519) to "extra_buffer" when the architecture is in _MAMBA_RADIX_CACHE_ARCHS (:369-400)
# and _MAMBA_EXTRA_BUFFER_ARCHS (:403-433) with the default linear_attn_backend "triton" (supports_mamba_cache_
# extra_buffer :436-450, fields/exec_.py:542-548) and the overlap scheduler on (disable_overlap_schedule False,
# fields/schedule.py:193-199); otherwise to "no_buffer" with the overlap scheduler turned off. Granite-4.0-H is in the
# branch when its config's layer_types names a "mamba" layer (:462-466), as the published Granite-4.0-H configs do.
# Mamba-2 and Mamba are in neither list: the strategy stays "auto", no extra buffer (model_override_base.py:
# 260-265 mamba_extra_buffer_of), 3 slots. (Jamba is in neither because SGLang 0.5.23 has no Jamba model: refused,
# model_warnings.ENGINE_LACKS_MODEL.)
# Qwen3.5 / Qwen3.6 (their config's architectures: Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration)
# are in both lists (:377-380, :406-407).
SGLANG_MAMBA_EXTRA_BUFFER: dict[str, str] = {
    "qwen3_next": "Qwen3NextForCausalLM", "nemotron_h": "NemotronHForCausalLM", "falcon_h1": "FalconH1ForCausalLM",
    "granitemoehybrid": "GraniteMoeHybridForCausalLM", "qwen3_5_text": "Qwen3_5ForConditionalGeneration",
    "qwen3_5_moe_text": "Qwen3_5MoeForConditionalGeneration"}


def mamba_state_slots(strategy: str, overlap: bool = True, radix: bool = True) -> int:
    """Eq. (4b)'s state slots per running request under the radix-cache ``strategy`` (_calculate_mamba_ratio,
    kv_cache_configurator.py:3062-3088: 1 with the radix cache disabled (:3063-3064), else 3 +
    get_mamba_tracking_slots (allocation_sizing.py:11-19: no_buffer 0, extra_buffer_lazy 1, extra_buffer 2 with the
    overlap scheduler and 1 without); SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK off)."""
    if not radix:
        return 1
    tracking = 0 if strategy == "no_buffer" else 1 if strategy == "extra_buffer_lazy" or not overlap else 2
    return E.SGLANG_MAMBA_REQUESTS_RATIO + tracking


def mamba_radix_cache_strategy(spec: ModelSpec, given: str | None = None, overlap: bool = True,
                               radix: bool = True) -> tuple[str, str]:
    """Eq. (4b): SGLang's mamba radix-cache strategy for hybrid ``spec`` and why (``given``:
    --mamba-radix-cache-strategy, None: "auto"; ``overlap``: the overlap scheduler on, i.e. no
    --disable-overlap-schedule; ``radix``: the radix cache on, i.e. no --disable-radix-cache). The strategies SGLang
    stops at start for are refused: an extra buffer on a family without it (mamba_hook.py:115-120
    validate_mamba_extra_buffer; model_hook.py:1059-1066 for an architecture outside the hybrid branch), no_buffer
    with the overlap scheduler on for a family in the branch (validate_mamba_no_buffer, mamba_hook.py:156-160), and
    extra_buffer_lazy with it off (kv_cache_configurator.py:3073-3076). Without the radix cache no strategy is read
    (overrides.py:473-474, model_override_base.py:260-265): "none" (a given one is refused by the workload)."""
    if not radix:
        return "none", ("the radix cache is disabled (given): SGLang resolves no strategy (arg_groups/overrides.py:"
                        "473-474) and keeps no extra buffer (model_override_base.py:260-265 mamba_extra_buffer_of)")
    arch = SGLANG_MAMBA_EXTRA_BUFFER.get(spec.model_type)
    if given is not None and given != "no_buffer" and arch is None:
        raise FieldError("mamba_radix_cache_strategy", (
            f"mamba_radix_cache_strategy {given} is not served for {spec.name}: SGLang gives the extra buffer only to "
            f"the architectures of _MAMBA_EXTRA_BUFFER_ARCHS (arg_groups/overrides.py:403-433: Qwen3-Next, "
            "Nemotron-H, Falcon-H1, Granite-4.0-H, ...) and stops at start for another; give no_buffer"))
    if arch is not None and given == "no_buffer" and overlap:
        raise FieldError("mamba_radix_cache_strategy", also=("disable_overlap_schedule",), message=(
            f"mamba_radix_cache_strategy no_buffer needs disable_overlap_schedule for {spec.name}: SGLang stops at "
            "start with no_buffer and its overlap scheduler on (validate_mamba_no_buffer, arg_groups/mamba_hook.py:"
            "156-160); give disable_overlap_schedule too (with it alone SGLang's auto is no_buffer)"))
    if given == "extra_buffer_lazy" and not overlap:
        raise FieldError("mamba_radix_cache_strategy", also=("disable_overlap_schedule",), message=(
            "mamba_radix_cache_strategy extra_buffer_lazy needs the overlap scheduler: SGLang stops at start with it "
            "and disable_overlap_schedule (\"Lazy extra buffer requires overlap schedule\", mem_cache/"
            "kv_cache_configurator.py:3073-3076); give extra_buffer or no_buffer"))
    off = "" if overlap else ", the overlap scheduler off (given)"
    if given == "no_buffer":
        return given, ("given" if arch is None else "given, with the overlap scheduler off (given), as SGLang "
                       "requires for this family (mamba_hook.py:156-160)")
    if given is not None:
        return given, f"given{off}"
    if arch is not None:
        if not overlap:
            return "no_buffer", (f"SGLang's default for {arch} with the overlap scheduler off (given): "
                                 "_mamba_radix_cache_resolution (arg_groups/overrides.py:453-487) resolves auto to "
                                 "no_buffer (:484-486)")
        return "extra_buffer", (f"SGLang's default for {arch}: _mamba_radix_cache_resolution (arg_groups/overrides.py:"
                                "453-487) resolves auto to extra_buffer with the overlap scheduler on (its default) "
                                "and linear_attn_backend triton (its default); disable_overlap_schedule gives "
                                "no_buffer")
    return "no_buffer", (f"SGLang's default for model_type {spec.model_type!r}: its architecture is not in "
                         "_MAMBA_EXTRA_BUFFER_ARCHS (arg_groups/overrides.py:403-433), no extra buffer")


# The window SGLang's scheduler evicts a hybrid model's SWA tokens by (eq. 3s, S4's w), as the config's sliding_window
# (for Llama 4 attention_chunk_size, which the spec carries as sliding_window) plus this offset: GPT-OSS and Gemma 4
# answer get_attention_sliding_window_size with sliding_window - 1 (models/gpt_oss.py:131-132, gemma4_mm.py:314-315,
# gemma4_causal.py:83-84: HF's window includes the current token, SGLang's does not); Llama 4 has none, so the model
# runner takes attention_chunk_size (model_executor/model_runner_components/load_model_utils.py:144-157).
SGLANG_SWA_WINDOW_OFFSET: dict[str, int] = {"gpt_oss": -1, "gemma4": -1, "gemma4_text": -1, "llama4": 0}


def sglang_swa_window(spec: ModelSpec) -> int:
    """Eq. (3s): the window [tokens] SGLang evicts ``spec``'s SWA-pool tokens by (``SGLANG_SWA_WINDOW_OFFSET``)."""
    return (spec.sliding_window or 0) + SGLANG_SWA_WINDOW_OFFSET.get(spec.model_type, 0)


def swa_kv_pool(spec: ModelSpec, version: str | None = None) -> tuple[str, str] | None:
    """Eq. (3s): which KV pool SGLang release ``version`` (None: the current one) gives ``spec`` ("hybrid", "one" or
    "one_assumed") and why; None for a model without sliding-window layers (the one pool, nothing to say). GPT-OSS
    gets the one pool before 0.5.8 (E.SGLANG_GPT_OSS_ONE_POOL_UNTIL; a release named without its patch, '0.5', is
    its .0); with no release named, the profile's own (0.5.23) rule."""
    if "sliding" not in spec.kv_cache_layer_types:
        return None
    if spec.model_type == "gpt_oss" and version is not None and \
            E.release_patch("sglang", version) < E.SGLANG_GPT_OSS_ONE_POOL_UNTIL:
        return ("one", E.SGLANG_GPT_OSS_ONE_POOL_SOURCE)
    return SWA_KV_POOL.get(spec.model_type, (
        "one_assumed", f"model_type {spec.model_type!r} is not a family this table has read: SGLang gives two pools "
                       "when the config's architecture is in is_hybrid_swa_model's list (configs/model_config.py:"
                       "2651-2697, SWA_SINK_ARCHS :88-96) or it sets is_hybrid_swa (:2693-2695), else one"))


def compose_sglang(ctx: Context) -> None:
    spec, w, acc = ctx.spec, ctx.w, ctx.acc
    refuse_mamba_settings(ctx)
    tp = w.tensor_parallel
    mla = spec.mla is not None
    share = kv_fraction_per_device(spec, tp, mla_latent=True) * ctx.kv_stage_share  # pipeline.py
    one_token = kv_cache(spec, 1, 1, ctx.kv_dtype, mla_mode="latent", indexer_cache=ctx.profile.dsa_indexer_cache,
                         latent_cache=ctx.profile.dsa_latent_cache)  # the device's DSA row (E.serving_profile)
    ds_row = ds_mla_bytes_per_token_layer(spec, ctx.kv_dtype, "fp8_ds_mla")
    if ds_row is not None:  # a DSA model's quantized latent: which row the device's default backend reads
        scaled = ctx.profile.dsa_latent_cache == "fp8_ds_mla"
        acc.assumptions.append(Assumption(
            "dsa_kv_layout", "fp8_ds_mla" if scaled else "raw fp8 MLA", True,
            (f"{ds_row:g}-B scaled row (kv_lora_rank e4m3 + fp32 scale per 128 + bf16 rope, kv_cache.py eq. 7) under "
             "SGLang's default DSA backend flashmla_kv below compute capability 10.0"
             + (" (capability not known: sized as on Hopper)" if w.gpu_capability is None else "") if scaled else
             "raw kv_lora_rank + qk_rope_head_dim row at 1 B (eq. 2) under SGLang's trtllm (compute capability >= "
             "10.0) or ROCm DSA backends")
            + f"; the indexer key beside it at "
              f"{indexer_bytes_per_token_layer(spec, ctx.kv_dtype, ctx.profile.dsa_indexer_cache):g} B; "
              + E.SGLANG_DSA_LATENT_SOURCE))
    cell = per_device(int(one_token.bytes_per_token), share)
    pool_kind = swa_kv_pool(spec, w.engine_version)
    # SGLang's default page_size on CUDA is 1 (arg_groups/overrides.py:1341-1363 _page_size_default); a DSA model,
    # DeepSeek-V3 under trtllm_mla and GPT-OSS under trtllm_mha get 64 (E.sglang_page_size): the pool is whole pages (eq. 3) and each request holds
    # ceil(tokens / page) of them (utils/common.py:4859-4861 get_num_new_pages)
    page, page_why = E.sglang_page_size(spec, w.device, w.gpu_runtime, w.gpu_capability)
    if page != 1:
        acc.assumptions.append(Assumption(
            "sglang_page_size", page, True,
            page_why + f"; the token pool is whole pages (pool_configurator.py:646, 652) and each request holds "
                       f"ceil(tokens / {page}) of them (utils/common.py:4859-4861 get_num_new_pages)"))
    swa: tuple[int, int, float] | None = None  # eq. (3s): (B_full, B_swa, swa_full_tokens_ratio) per device
    # the need's sliding-layer tokens: eq. (S4)'s in the hybrid pool; in the one pool every token (extra = context)
    need_extra = w.context
    # eq. (3s'): the SWA pool sized from the running-request cap (SWARequestCapPoolConfigurator.is_applicable,
    # pool_configurator.py:986-1003: radix cache disabled, max_running_requests given, chunked prefill on and
    # a runner window: kvc.sliding_window_size, the model runner's, pool_configurator.py:1001 and model_runner.py:669)
    swa_cap_mode = (pool_kind is not None and pool_kind[0] == "hybrid" and w.disable_radix_cache
                    and w.max_num_seqs is not None)
    if pool_kind is not None and pool_kind[0] == "hybrid" and swa_cap_mode:
        ratio = E.SGLANG_SWA_FULL_TOKENS_RATIO  # not read (S6 sizes the SWA pool)
        acc.assumptions.append(Assumption(
            "sglang_swa_pool", "request cap", True,
            "the radix cache disabled and max_running_requests given: SGLang sizes the SWA pool from that cap, "
            "(window + 128 + 2 pages) x max_running_requests + chunks in flight (2 with the overlap scheduler, 1 "
            "without) x chunked_prefill_size + a page, the full pool taking the rest; swa_full_tokens_ratio is not "
            "read (SWARequestCapPoolConfigurator, model_executor/pool_configurator.py:924-1032; eq. 3s' of "
            "estimate/inference/sglang.py, formulas/swa_pool.py S6, S7)"))
    elif pool_kind is not None and pool_kind[0] == "hybrid":
        ratio = float(acc.assume("swa_full_tokens_ratio", E.SGLANG_SWA_FULL_TOKENS_RATIO, None,
                                 "SGLang default (--swa-full-tokens-ratio fallback, arg_groups/fields/schedule.py:"
                                 "150-162): the SWA pool holds ratio x the full pool's tokens (eq. 3s)"))
    if pool_kind is not None and pool_kind[0] == "hybrid":
        acc.assumptions.append(Assumption(
            "sglang_kv_pool", "hybrid SWA", True, f"{pool_kind[1]}: a full pool for the {spec.layer_types.count('full')} "
            f"full layers and an SWA pool for the {spec.layer_types.count('sliding')} sliding layers (pool_configurator.py:656-921, "
            "eq. 3s of estimate/inference/sglang.py); --disable-hybrid-swa-memory would give the one pool"))
        # every layer of each kind has a buffer, KV-sharing ones included (swa_memory_pool.py:54-56, 96-107)
        n_full, n_swa = spec.layer_types.count("full"), spec.layer_types.count("sliding")
        swa = (per_device(int(one_token.layer_bytes_per_token_full * n_full), share),
               per_device(int(one_token.layer_bytes_per_token_sliding * n_swa), share), ratio)
        swa_window = sglang_swa_window(spec)  # spec.sliding_window + need_extra = eq. (S4)'s tokens held
        need_extra = (swa_tokens_held(w.context, swa_window, E.SGLANG_SWA_EVICTION_INTERVAL, page)
                      - (spec.sliding_window or 0))
        if page == 1:  # a larger page has its own assumption above (E.sglang_page_size)
            acc.assumptions.append(Assumption(
                "sglang_page_size", page, True,
                "SGLang's default page_size on CUDA (arg_groups/overrides.py:1341-1363), the pools' alignment and eq. "
                "(S4)'s 2 x page; a backend that forces larger pages is applied where SGLang picks it by default "
                "(GPT-OSS on compute capability 10.x: trtllm_mha, page 64, engines.py sglang_page_size)"))
    elif pool_kind is not None:
        acc.assumptions.append(Assumption(
            "sglang_kv_pool", "one pool (assumed)" if pool_kind[0] == "one_assumed" else "one pool", True,
            f"{pool_kind[1]}: every layer, sliding or not, counted as holding every token of a sequence (eq. 3 of "
            "estimate/inference/sglang.py)"))
        if pool_kind[0] == "one_assumed":
            acc.warnings.append(f"SGLang's KV pool for {spec.name} (sliding-window layers) is assumed to be the one "
                                f"pool ({pool_kind[1]}); were it the hybrid SWA pool, SGLang would hold more tokens "
                                "than shown")
    if any(spec.kv_shared_layers):
        acc.assumptions.append(Assumption(
            "sglang_kv_shared_cells", sum(spec.kv_shared_layers), True,
            "the KV-sharing layers write no K/V of their own: SGLang's Gemma 4 points their RadixAttention at the last "
            "earlier layer of their type and does not save their K/V (sglang python/sglang/srt/models/"
            "gemma4_causal.py @03826cdd Gemma4Attention: layer_id=kv_shared_layer_index, save_kv_cache off); "
            + ("SGLang 0.5.23's hybrid pool still gives each a buffer (swa_memory_pool.py:54-56, 96-107): counted in "
               "the pool split (eq. 3s), not in the need" if swa is not None else
               "whether the one pool still reserves buffers for them was not checked")))
    acc.items.append(weights_item(ctx.wb, "device"))
    ctx.details.update({"kv_cell_bytes": cell})
    # without a memory SGLang's default max_running_requests (eq. 4, from the pool) is unknown: a stated one caps
    need = kv_item(ctx, w.context, running_sequences(w, w.max_num_seqs), "device", block=page,
                   window_extra=need_extra)
    ctx.details.update({"running_cap": w.max_num_seqs, "running_cap_name": "max_running_requests",
                        "running_sequences": running_sequences(w, w.max_num_seqs)})
    if w.memory is None:
        acc.items.append(need)
        device_context(acc.items, acc.assumptions, w.gpu_runtime, formula="CUDA context, before the pool is sized")
        acc.warnings.append("SGLang sizes its token pool from the GPU's memory (--mem-fraction-static); give --memory "
                            "to see its max_total_num_tokens and what it admits")
        _engine_notes(acc, w, sized=False)
        return
    default, parts = default_mem_fraction_static(w.memory, tp, mla, w.max_num_batched_tokens)
    if w.mem_fraction_static is None and default <= 0:  # eq. (1) leaves nothing: no pool, no negative fraction
        too_small = (f"the device is too small for SGLang: its {parts['gpu_mem_mib']:,.0f} MiB are less than the "
                     f"{parts['reserved_mib']:,.0f} MiB SGLang's default mem_fraction_static keeps back for "
                     "activations and CUDA graphs (memory_hook.py:289-339), so no token pool is left")
        acc.items.append(need)
        device_context(acc.items, acc.assumptions, w.gpu_runtime, formula="CUDA context, before the pool is sized")
        ctx.details.update({
            "sglang_too_small": too_small, "mem_fraction_static": None, "max_total_num_tokens": 0, "kv_tokens": 0,
            "max_running_requests": 0, "max_concurrency_at_context": 0, "admitted_sequences": 0,
            "running_sequences": 0,
            "sglang_reserved_mib": parts["reserved_mib"], "kv_needed_bytes": need.bytes,
            "workload_bytes": ctx.wb.total + need.bytes + context_span(w.gpu_runtime).expected,
            "workload_budget_bytes": 0,  # the reserve takes the whole device: nothing is left for the workload
            # what SGLang would hold: the whole device CUDA sees (it does not start)
            "reserved_bytes": w.memory if w.cuda_memory is None else w.cuda_memory})
        _engine_notes(acc, w, sized=False)
        return
    why = (f"SGLang default for {parts['gpu_mem_mib']:.0f} MiB, TP {tp}: (M - reserved {parts['reserved_mib']:.0f} "
           "MiB) / M (memory_hook.py:289-339)")
    vlm = sglang_vlm_shape(spec) if w.mem_fraction_static is None else None
    if vlm is not None:  # eq. (1v): SGLang keeps more back for the vision encoder of a multimodal model
        factor = vlm_fraction_factor(vlm[0], vlm[1])
        acc.assumptions.append(Assumption(
            "sglang_vlm_mem_fraction_factor", round(factor, 6), True,
            f"a multimodal model: SGLang multiplies its default mem_fraction_static {default} by 0.95 x clamp(1 - 0.1 x "
            f"({vlm[0]} x {vlm[1]}^2 / (24 x 1024^2) - 1), 0.8, 1.05) = {factor:.4f}; {vlm[2]} (adjust_mem_fraction_"
            "for_vlm, memory_hook.py:417-462; formulas/vlm_memory_fraction.py V1-V3; not with --language-only or "
            "SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, whose 8 GiB rule is not modelled)"))
        why += f" x {factor:.4f} for the vision encoder (eq. 1v)"
        # SGLang does not round it again; 6 digits keep the shown share short (< 1e-6 of the memory)
        default = round(vlm_mem_fraction_static(default, vlm[0], vlm[1]), 6)
    mfs = float(acc.assume("mem_fraction_static", default, w.mem_fraction_static, why))
    acc.assume("chunked_prefill_size", parts["chunked_prefill_size"], w.max_num_batched_tokens,
               "SGLang memory-tier default (memory_hook.py:90-160)")
    # measured after the parallel groups exist (distributed/bootstrap.py measure_pre_model_load_memory: "Call after
    # parallel initialization"): with TP, NCCL's communicator buffers are already allocated
    comm = E.VLLM_NON_TORCH_TP.expected if tp > 1 else 0
    # the free memory torch reports (sglang 0.5.6 srt/utils/common.py:491-518 get_available_gpu_memory:
    # torch.cuda.mem_get_info's free) is of CUDA's total, below nvidia-smi's memory.total, which eq. (1)'s M reads
    # (srt/utils/common.py:1610 get_nvgpu_memory_capacity: nvidia-smi --query-gpu=memory.total)
    total = cuda_total(acc, w, "SGLang's pool, mem_fraction_static x the free memory before the weights,")
    pre = total - context_span(w.gpu_runtime).expected - comm
    pool = max(int(mfs * pre) - ctx.wb.total, 0)
    mamba = _mamba_pool(ctx, pool)
    if mamba is not None:
        pool = max(pool - mamba[1], 0)
    # eq. (4)'s context_len: the window SGLang derives (estimate/context_window.py eq. W3), or the context itself past
    # it under the override (model_config.py:1291-1318: context_len = the given --context-length); no window known:
    # the context, as before
    window = engine_window(spec, "sglang")
    context_len = (w.context if window is None or (w.allow_long_context and w.context > window.tokens)
                   else window.tokens)
    no_kv = spec.attention_free
    if swa is not None and swa_cap_mode and pool > 0:  # eq. (3s'): the SWA pool from the running-request cap
        # S6's window is the runner's, as S4's: SWAChunkCapPoolConfigurator passes kvc.sliding_window_size
        # (pool_configurator.py:982), the runner's resolve_sliding_window_size (model_runner.py:669, 1353;
        # load_model_utils.py:144-157): the model's get_attention_sliding_window_size where it has one (GPT-OSS:
        # config.sliding_window - 1, models/gpt_oss.py:131-132, 1374-1375), so 127 + 128 + 2 = 257 per request
        tokens, swa_tokens = swa_request_cap_pool_tokens(
            pool, swa[0], swa[1], int(w.max_num_seqs or 1), sglang_swa_window(spec),
            E.SGLANG_SWA_EVICTION_INTERVAL, int(parts["chunked_prefill_size"]),
            1 if w.disable_overlap_schedule else 2, page)
    elif swa is not None:  # eq. (3s): max_total_num_tokens is the full pool's
        tokens, swa_tokens = hybrid_swa_pool_tokens(pool, swa[0], swa[1], swa[2], page)
    elif no_kv and pool > 0:  # eq. (3m): no attention layer, a token pool of context_len tokens of 0 B
        tokens = context_len // page * page
    else:
        tokens = pool // cell // page * page if cell else 0
    # eq. (4)/(4b) split by what each term is (resolve_max_num_reqs, kv_cache_configurator.py:3119-3150): the
    # configured cap -- a given --max-running-requests, else eq. (4)'s estimate clamped to [2048, 4096], a constant
    # band that is no pool's room -- and the bounds memory sets, the token pool's tokens // 2 and eq. (4b)'s MambaPool
    # max_mamba_cache_size // s: those are the pools' room (``admits``, as vLLM's KV pool), not a running cap, so a
    # concurrency past them is 'does not fit' (common.py eq. R1), never a queue behind a cap (probe20 D1)
    est_reqs = max(min(int(tokens / context_len * 512), 4096), 2048)
    cap = w.max_num_seqs if w.max_num_seqs is not None else est_reqs
    mamba_room = mamba[0] // mamba[4] if mamba is not None else None
    max_running = min(cap, tokens // 2, *(() if mamba_room is None else (mamba_room,)))  # SGLang's own figure
    # validate_swa_pool_size (pool_configurator.py:198-216): an SWA pool of no more than the runner's sliding window
    # (eq. 3s: SGLang's own, 127 for GPT-OSS, attention_chunk_size for Llama 4) + one page stops SGLang at start-up
    swa_no_start = swa is not None and pool > 0 and (
        tokens <= 0 if swa_cap_mode else swa_tokens <= sglang_swa_window(spec) + page)
    # the sequences of the context SGLang's pools have room for at once: the token pool's (eq. 3), its tokens // 2
    # (eq. 4) and the MambaPool's (eq. 4b); the one that binds names the verdict's pool (compose.py _check_fit). An
    # SWA pool sized from the running cap (eq. 3s') has room for that cap's sequences: S6's prefill chunks in flight
    # and its page are the chunked prefill's, not more requests' (review27 D6: counted as room, 64 read as 128)
    swa_room: int | None = None
    if swa is not None and swa_cap_mode and not swa_no_start:
        reserve_tokens = (1 if w.disable_overlap_schedule else 2) * int(parts["chunked_prefill_size"]) + page
        swa_room = max(0, swa_tokens - reserve_tokens) // swa_tokens_held(
            w.context, sglang_swa_window(spec), E.SGLANG_SWA_EVICTION_INTERVAL, page)
    fits_one = (0 if swa_no_start else
                min(tokens // paged_tokens(w.context, page), swa_room) if swa_room is not None else
                hybrid_swa_admitted(tokens, swa_tokens, w.context, sglang_swa_window(spec),
                                    E.SGLANG_SWA_EVICTION_INTERVAL, page) if swa is not None
                else tokens // paged_tokens(w.context, page))
    bounds = [(fits_one, SWA_POOL if swa_room is not None and swa_room < tokens // paged_tokens(w.context, page)
               else "token pool"),
              (tokens // 2, "token pool (max_total_num_tokens // 2)")]
    if mamba_room is not None:
        bounds.append((mamba_room, MAMBA_POOL))
    admits, admits_by = min(bounds, key=lambda b: b[0])
    admitted = min(admits, cap)
    if cap != w.max_num_seqs:  # eq. (4)'s default cap: the need is for what it would run with room (common.py eq. R1)
        need = kv_item(ctx, w.context, running_sequences(w, cap), "device", block=page, window_extra=need_extra)
    # the MambaPool's share of the need: the state slots those sequences take (s each + the padding slot), the pool's
    # own size where that is more (it is preallocated whole: eq. 2b)
    need_seqs = running_sequences(w, cap)
    mamba_need = (max(mamba[1], (need_seqs * mamba[4] + 1) * mamba[2]) if mamba is not None else 0)
    # where the MambaPool is short, the token pool's room cannot make up for it (eq. 2b's split is fixed): that pool
    # counts whole, so the need exceeds the memory exactly when a pool is short (the verdict's admits)
    mamba_short = mamba is not None and need_seqs * mamba[4] > mamba[0]
    kv_part = max(need.bytes, pool) if mamba_short else need.bytes
    reserve = pre - int(mfs * pre)
    if swa is not None:
        acc.items.append(Item("kv_cache", pool, "device",
                              formula=f"{mfs} x (memory - CUDA context) {format_bytes(pre)} - weights = full pool "
                                      f"{tokens:,} tokens x {swa[0]:,} B + SWA pool {swa_tokens:,} tokens x "
                                      f"{swa[1]:,} B " + (f"(sized from max_running_requests {w.max_num_seqs:,})"
                                                          if swa_cap_mode else
                                                          f"(swa_full_tokens_ratio {swa[2]:g})"),
                              source="SGLang kv_cache_configurator.py:2990-3060, pool_configurator.py:"
                                     + ("924-1032 (eqs. 2, 3s' of estimate/inference/sglang.py; formulas/swa_pool.py "
                                        "S6, S7)" if swa_cap_mode else "656-921 (eqs. 2, 3s of estimate/inference/"
                                        "sglang.py; formulas/swa_pool.py S1-S3)")))
        ctx.details.update({"swa_pool_tokens": swa_tokens, "full_pool_bytes_per_token": swa[0],
                            "swa_pool_bytes_per_token": swa[1]})
        ctx.details["swa_pool_sizing"] = "request cap" if swa_cap_mode else "ratio"
        if not swa_cap_mode:
            ctx.details["swa_full_tokens_ratio"] = swa[2]
    elif no_kv:
        acc.items.append(Item("kv_cache", 0, "device",
                              formula=f"no attention layer: a token pool of context_len {tokens:,} tokens x 0 B; the "
                                      f"{format_bytes(pool)} of eq. (2)'s rest the MambaPool leaves is not allocated",
                              source="SGLang configs/mamba2.py:36-38, pool_configurator.py:229-250, 637-647 (eq. 3m of "
                                     "estimate/inference/sglang.py)"))
        acc.warnings.append(
            f"SGLang's token pool for {spec.name} (no attention layer) holds context_len {tokens:,} tokens of 0 B "
            "(pool_configurator.py:246-250, 637-647: max_total_tokens or context_len): its running requests hold "
            f"{tokens:,} tokens together, {fits_one:,} sequence(s) of {w.context:,} tokens; SGLang's "
            "--max-total-tokens raises it (not modelled here)")
    else:
        acc.items.append(Item("kv_cache", pool, "device",
                              formula=f"{mfs} x (memory - CUDA context) {format_bytes(pre)} - weights = "
                                      f"{tokens:,} tokens x {cell:,} B",
                              source="SGLang kv_cache_configurator.py:2990-3060, pool_configurator.py:636-647 "
                                     "(eqs. 2-3 of estimate/inference/sglang.py)"))
    if mamba is not None:
        slots, mamba_bytes, per_req, how, state_slots = mamba
        acc.items.append(Item("recurrent_state_pool", mamba_bytes, "device",
                              formula=f"({how} + 1 padding slot) x mamba_cache_per_req {per_req:,} B "
                                      "(conv + SSM state of every recurrent layer, one request); preallocated",
                              source="SGLang kv_cache_configurator.py:3229-3409 (eq. 2b of "
                                     "estimate/inference/sglang.py); " + ctx.profile.state_source))
        ctx.details.update({"max_mamba_cache_size": slots, "mamba_pool_bytes": mamba_bytes,
                            "mamba_cache_per_req": per_req, "mamba_requests_ratio": state_slots,
                            "mamba_needed_bytes": mamba_need})
        if mamba_room is not None and mamba_room < min(cap, tokens // 2):  # resolve_max_num_reqs' capped_by_mamba
            acc.warnings.append(
                f"SGLang caps max_running_requests at {mamba_room:,} by its MambaPool: max_mamba_cache_size {slots:,} "
                f"// {state_slots} state slots per running request (kv_cache_configurator.py:3135-3150), below "
                + (f"max_running_requests {cap:,} (given)" if w.max_num_seqs is not None else
                   f"its other bounds (min(eq. 4's {cap:,}, max_total_num_tokens // 2 {tokens // 2:,}))")
                + "; this is memory: more requests at once than that do not fit. SGLang's remedies: a larger "
                "--mamba-full-memory-ratio or --max-mamba-cache-size, more memory, a smaller weight format")
    acc.items.append(Item("runtime_reserve", reserve, "device",
                          formula=f"(1 - {mfs}) x {format_bytes(pre)}: left for activations and CUDA graphs",
                          source="SGLang memory_hook.py:289-339 (eq. 1)"))
    device_context(acc.items, acc.assumptions, w.gpu_runtime, formula="CUDA context, before the pool is sized")
    if tp > 1:
        acc.span("communicators", E.VLLM_NON_TORCH_TP,
                 formula="NCCL communicator buffers with TP, allocated before the pool is sized")
    ctx.details.update({
        "mem_fraction_static": mfs, "kv_pool_bytes": 0 if no_kv else pool, "max_total_num_tokens": tokens,
        "kv_tokens": tokens,
        # SGLang's max_running_requests (what it logs): min(the cap, the pools' bounds)
        "max_running_requests": max_running,
        # the sequences of the context the pools admit at once (the verdict's, as vLLM's): the binding one named
        "max_concurrency_at_context": admits, "admits_bound": admits_by, "token_pool_room": fits_one,
        "admitted_sequences": admitted, "sglang_reserved_mib": parts["reserved_mib"],
        "runtime_reserve_bytes": reserve,  # the runtime_reserve row's figure: the one the vs-vLLM line names
        # the configured cap only (given, or eq. 4's estimate): the pools' bounds are admits above
        "running_cap": cap, "running_cap_name": "max_running_requests" if w.max_num_seqs is not None
        else "max_running_requests (eq. 4)",
        "running_sequences": running_sequences(w, cap, admits),
        "workload_bytes": ctx.wb.total + kv_part + reserve + context_span(w.gpu_runtime).expected + comm
                          + mamba_need,
        # workload_bytes <= memory exactly when the need fits the token pool and the MambaPool (eq. 2b's fixed split:
        # a short MambaPool counts the token pool whole beside its own need)
        "workload_budget_bytes": total,
        # the base mem_fraction_static multiplies (eq. 2): free memory before the weights load (verdict.py
        # sglang_pool_words, the words every answer says it in)
        "free_before_load_bytes": pre,
        # what SGLang holds once started: mem_fraction_static x pre (weights + pool) + its reserve + the context and
        # communicators measured before it = CUDA's total of the device (common.py cuda_total); the device total
        # exceeds it only with no pool (no start); with no attention layer the rest the MambaPool leaves is not
        # allocated (eq. 3m)
        "reserved_bytes": total - (pool if no_kv else 0),
        "kv_needed_bytes": need.bytes})
    if pool <= 0:  # no pool: SGLang refuses to start, nothing is served whatever the cap (compose.py's verdict says it)
        # by how much the weights (and the recurrent-state pool) exceed mem_fraction_static x pre (eq. 2)
        ctx.details["pool_shortfall_bytes"] = max(ctx.wb.total + (mamba[1] if mamba is not None else 0)
                                                  - int(mfs * pre), 0)
        ctx.details["sglang_no_pool"] = (
            f"SGLang would fail at start-up: mem_fraction_static {mfs} x {format_bytes(pre)} leaves nothing for the "
            f"token pool after {format_bytes(ctx.wb.total)} of weights"
            + (f" and {format_bytes(mamba[1])} of recurrent-state pool" if mamba is not None else "")
            + " (\"Loaded weights leave no GPU memory for the KV cache\", kv_cache_configurator.py:3039-3058); raise "
            "mem_fraction_static" + (", lower max_mamba_cache_size" if mamba is not None
                                       and w.max_mamba_cache_size is not None else "")
            + " or use more memory")
    elif swa_no_start and swa_cap_mode:
        ctx.details["sglang_no_pool"] = (
            f"SGLang would fail at start-up: its SWA pool sized from max_running_requests {w.max_num_seqs:,} "
            f"({swa_tokens:,} tokens) leaves no room for the full KV pool (SWARequestCapPoolConfigurator, "
            "pool_configurator.py:1024-1031); lower max_running_requests, raise mem_fraction_static or use more "
            "memory")
    elif swa_no_start:
        ctx.details["sglang_no_pool"] = (
            f"SGLang would fail at start-up: its SWA pool ({swa_tokens:,} tokens) cannot hold one request, whose "
            f"prefill needs the sliding window ({sglang_swa_window(spec)}) + page_size ({page}) (validate_swa_pool_size, "
            "pool_configurator.py:198-216); raise mem_fraction_static or use more memory")
    elif fits_one < 1:
        acc.warnings.append(f"one sequence of {w.context} tokens needs more than the {tokens:,} tokens SGLang's pool "
                            "holds")
    _engine_notes(acc, w, sized=True)
    if not no_kv:  # with no attention layer neither engine has KV tokens to compare
        _compare_vllm(ctx, tokens)


def _mamba_pool(ctx: Context, rest: int) -> tuple[int, int, int, str, int] | None:
    """Eq. (2b): (max_mamba_cache_size, its bytes, mamba_cache_per_req, how the size was reached, eq. (4b)'s state
    slots per running request) of a hybrid model; None without recurrent layers. ``rest``: eq. (2)'s memory after the
    weights."""
    w, acc = ctx.w, ctx.acc
    if not ctx.spec.recurrent_layer_count or rest <= 0:
        return None
    tp = w.tensor_parallel
    # mamba_cache_per_req (srt/configs/mamba_utils.py:62-71 @sglang 0.5.6): each layer's TP shard, a Mamba-2 conv
    # with its replicated groups (:100-107 extends n_groups by extra_groups_for_head_shards before divide(conv_dim,
    # tp)): formulas/recurrent_state.py eq. (4), the one rule extra_groups that vLLM's page also takes
    conv, ssm = state_dtypes(ctx)
    per_req = math.ceil(ctx.spec.recurrent_layer_count * layer_state_bytes_per_device(
        ctx.spec, tp, kv_dtype_bytes(conv), kv_dtype_bytes(ssm), ctx.profile.conv_state_window))
    if per_req <= 0:
        return None
    if w.max_mamba_cache_size is not None:  # eq. (2b'): the stated size, no split (kv_cache_configurator.py:3303-3307)
        slots = int(acc.assume("max_mamba_cache_size", None, w.max_mamba_cache_size, "given"))
        how = f"max_mamba_cache_size {slots:,} (given)"
    elif w.disable_radix_cache and w.max_num_seqs is not None:  # eq. (2b''): one slot per running request
        slots = max(1, w.max_num_seqs)
        acc.assume("max_mamba_cache_size", slots, None,
                   f"SGLang's with the radix cache disabled and max_running_requests {w.max_num_seqs:,} given: "
                   "max(1, max_running_requests) slots, no ratio split (kv_cache_configurator.py:3325-3335)")
        how = f"max_mamba_cache_size {slots:,} = max_running_requests (given; radix cache disabled)"
    else:
        ratio = float(acc.assume(
            "mamba_full_memory_ratio", E.SGLANG_MAMBA_FULL_MEMORY_RATIO, w.mamba_full_memory_ratio,
            "SGLang default (--mamba-full-memory-ratio fallback, arg_groups/fields/schedule.py:220-227): the "
            "recurrent-state pool gets rest x r / (1 + r) (kv_cache_configurator.py:3346-3386)"))
        slots = max(int((rest * ratio / (1 + ratio) - per_req) // per_req), 0)
        stated = "given" if w.mamba_full_memory_ratio is not None else "SGLang's default"
        acc.assume("max_mamba_cache_size", slots, None,
                   f"SGLang's (--max-mamba-cache-size unset), from mamba_full_memory_ratio {ratio} ({stated}): "
                   f"int((rest x {ratio} / (1 + {ratio}) - per_req) // mamba_cache_per_req {per_req:,} B) "
                   "(kv_cache_configurator.py:3346-3386)")
        how = (f"max_mamba_cache_size {slots:,} = int((rest {rest:,} B x {ratio} / (1 + {ratio}) - {per_req:,}) // "
               f"{per_req:,})")
    overlap, radix = not w.disable_overlap_schedule, not w.disable_radix_cache
    strategy, why = mamba_radix_cache_strategy(ctx.spec, w.mamba_radix_cache_strategy, overlap, radix)
    state_slots = mamba_state_slots(strategy, overlap, radix)
    ctx.details["mamba_radix_cache_strategy"] = strategy
    slots_why = (f"3 slots + {state_slots - E.SGLANG_MAMBA_REQUESTS_RATIO} tracking slots, allocation_sizing.py:"
                 "11-19" if radix else "1 slot: the radix cache is disabled, :3063-3064")
    text = (f"{why}: running requests <= max_mamba_cache_size // {state_slots} (_calculate_mamba_ratio, "
            f"kv_cache_configurator.py:3062-3088: {slots_why}); the MambaPool's size (eq. 2b) is the same under "
            "every strategy")
    if radix:
        acc.assume("mamba_radix_cache_strategy", strategy, w.mamba_radix_cache_strategy, text)
    else:  # follows the given disable_radix_cache: not a default, and its why said
        acc.assumptions.append(Assumption("mamba_radix_cache_strategy", strategy, False, text))
    return slots, (slots + 1) * per_req, per_req, how, state_slots  # + the padding slot (:3404-3409)


def refuse_mamba_settings(ctx: Context) -> None:
    """--max-mamba-cache-size / --mamba-full-memory-ratio size the recurrent-state pool: on a model without recurrent
    layers they are refused, not ignored (as llama.cpp's --n-cpu-moe on a model without experts: llamacpp.py)."""
    spec, w = ctx.spec, ctx.w
    given = [n for n in ("max_mamba_cache_size", "mamba_full_memory_ratio", "mamba_radix_cache_strategy")
             if getattr(w, n) is not None]  # (disable_overlap_schedule / disable_radix_cache: any model's)
    if given and not spec.recurrent_layer_count:
        raise FieldError(given[0], also=tuple(given[1:]), message=(
            f"{' and '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to SGLang's recurrent-state pool "
            f"(MambaPool); {spec.name} has no recurrent (Mamba / linear-attention) layers"))
    if not spec.recurrent_layer_count:
        return
    k = w.max_mamba_cache_size
    overlap, radix = not w.disable_overlap_schedule, not w.disable_radix_cache
    strategy = mamba_radix_cache_strategy(spec, w.mamba_radix_cache_strategy, overlap, radix)[0]
    ratio = mamba_state_slots(strategy, overlap, radix)
    if k is not None and k < ratio:  # eq. (4b): K // ratio running requests, whatever the memory: nothing would run
        fewest = mamba_state_slots("no_buffer")
        # the extra buffer's tracking slots are the strategy's (review25 D8): no_buffer runs with the fewest, which
        # SGLang's auto gives these families with the overlap scheduler off (overrides.py:484-486; an explicit
        # no_buffer needs it too: mamba_hook.py:156-160)
        other = (", or disable_overlap_schedule" + ("" if w.mamba_radix_cache_strategy is None else
                                                    " with mamba_radix_cache_strategy no_buffer")
                 + f" (no_buffer), which runs with {fewest}" if strategy != "no_buffer" and k >= fewest else "")
        raise FieldError("max_mamba_cache_size", (
            f"max_mamba_cache_size {k} runs no request: SGLang runs at most max_mamba_cache_size // {ratio} = "
            f"{k // ratio} (state slots per running request with mamba_radix_cache_strategy {strategy}, "
            f"_calculate_mamba_ratio, kv_cache_configurator.py:3062-3088, 3135-3150); give at least {ratio}{other}"),
            also=("mamba_radix_cache_strategy", "disable_overlap_schedule"))


def _radix_note(w: Any) -> Any:
    if w.disable_radix_cache:
        return Assumption("radix_cache", "off", False, "given (disable_radix_cache): SGLang keeps no prefix cache, a "
                          "finished request's KV is freed and requests that share a prefix each hold it; capacity "
                          "shown for requests sharing no prefix, as with it on")
    return Assumption("radix_cache", "on", True, "SGLang keeps finished requests' KV as a prefix cache in the same pool "
                      "and evicts it when running requests need room: capacity shown for requests sharing no prefix")


def _engine_notes(acc: Any, w: Any, sized: bool) -> None:
    """The radix cache's assumption (always once a pool is sized; given off, always) and the overlap scheduler's
    (given off)."""
    if sized or w.disable_radix_cache:
        acc.assumptions.append(_radix_note(w))
    if w.disable_overlap_schedule:
        acc.assumptions.append(_overlap_note())


def _overlap_note() -> Any:
    """The overlap scheduler off (disable_overlap_schedule): what it moves here and what it does not."""
    return Assumption(
        "overlap_schedule", "off", False,
        "given (disable_overlap_schedule): SGLang runs a step's host work (scheduling, output processing) between the "
        "device's steps (managers/scheduler.py:500-502 enable_overlap; event_loop_normal :2026, not "
        "event_loop_overlap :2061); the speed's SGLang host time per decode step (estimate/engines.py STEP_HOST) is "
        "established by no measurement, with the scheduler on or off, and is left out (0 s): decode may be slower "
        "than shown. The memory moves only for a hybrid model: its state slots per running request (eq. 4b)")


def _compare_vllm(ctx: Context, sglang_tokens: int) -> None:
    """The KV tokens vLLM's default pool would hold on the same card (one core: estimate_inference with vllm)."""
    from .compose import estimate_inference
    w = ctx.w
    # the group as the user gave it (none given: the rule of estimate/formats.py engine_weights, as SGLang's own)
    group: dict[str, Any] = {"group_size": w.group_size} if "group_size" in (w.given or ()) else {}
    try:
        # on the same device: its kind, runtime and CUDA capability (vLLM's router dtype: estimate/device.py
        # weights_capability), as the workload holds them
        v = estimate_inference(ctx.spec, engine="vllm", weights=w.weights, kv_dtype=w.kv_dtype, context=w.context,
                               concurrency=w.concurrency, memory=w.memory, cuda_memory=w.cuda_memory,
                               tensor_parallel=w.tensor_parallel,
                               dtype=w.dtype, device=w.device, gpu_runtime=w.gpu_runtime,
                               gpu_capability=w.gpu_capability, **group)
    except FieldError as e:  # a KV dtype vLLM stores only as the model's own (engines.py kv_dtypes_model_only)
        if e.field != "kv_dtype":
            raise
        return  # no vLLM pool to compare with: SGLang's own answer stands
    vt = int(v.details.get("kv_tokens", 0))
    ctx.details["vllm_kv_tokens"] = vt
    measured = sum(i.bytes for i in v.items if i.name in ("activations", "non_torch", "cuda_graphs"))
    ctx.details["engines_differ_because"] = (
        f"SGLang: mem_fraction_static {ctx.details['mem_fraction_static']} x (memory free before loading) - weights "
        f"= {sglang_tokens:,} tokens, leaving (1 - mem_fraction_static) of it, "
        f"{format_bytes(ctx.details['runtime_reserve_bytes'])} (runtime_reserve), for activations and CUDA graphs; "
        "vLLM: " + (vllm_pool_words(int(v.details["cuda_total_bytes"]), float(v.details["gpu_memory_utilization"]))
                    if "cuda_total_bytes" in v.details else
                    f"gpu_memory_utilization {v.details.get('gpu_memory_utilization')} x CUDA's total")
        + " - weights - profiled activations, non-torch and CUDA "
        f"graphs ({format_bytes(measured)}) = {vt:,} tokens"
        # SGLang's auto is FP8 for some models and devices (E.sglang_auto_kv_dtype): tokens of other sizes
        + next((f"; KV cache: SGLang {ctx.kv_dtype}, vLLM {a.value}" for a in v.assumptions
                if a.name == "kv_dtype" and a.value != ctx.kv_dtype), ""))
