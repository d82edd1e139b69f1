"""KV cache size from the attention structure.

Per token and layer, a standard attention layer caches one key and one value vector per KV head:

    kv_bytes_per_token_layer = (head_dim_k + head_dim_v) * num_kv_heads * bytes_per_element      (1)

(Pope et al. 2022, "Efficiently Scaling Transformer Inference", arXiv 2211.05102, section 3.1; GQA/MQA
shrink num_kv_heads: Ainslie et al. 2023, arXiv 2305.13245.) MLA caches one compressed latent and one
shared rotary key per token instead (DeepSeek-V2, arXiv 2405.04434, eq. 10-11 and Table 1):

    mla_bytes_per_token_layer = (kv_lora_rank + qk_rope_head_dim) * bytes_per_element            (2)

Engines that do not implement the latent cache (older transformers DeepSeek code, naive ports) cache the
expanded keys and values: num_heads * (qk_nope_head_dim + qk_rope_head_dim) + num_heads * v_head_dim
elements (``mla_mode="expanded"``); transformers 5.x and vLLM cache the latent.

DeepSeek Sparse Attention (DeepSeek-V3.2) adds the lightning indexer's key, one head of ``index_head_dim`` per
token and layer, cached beside the latent:

    dsa_bytes_per_token_layer = mla_bytes_per_token_layer + index_head_dim * indexer_bytes_per_element   (3)

transformers keeps the indexer keys at the model dtype like the rest of the cache (cache_utils.py
``DynamicIndexedLayer.indexer_keys`` [B, T, index_head_dim]; measured in tests/formulas/test_kv_cache_forward.py);
vLLM and SGLang store them as FP8 with one fp32 scale per 128 values, index_head_dim + index_head_dim // 128 * 4
bytes of uint8 whatever the KV dtype (vLLM ``DeepseekV32IndexerCache`` head_size, SGLang ``NSATokenToKVPool``
index_k_with_scale_buffer): ``indexer_cache="fp8_scaled"``.

vLLM stores a quantized KV cache of a DSA model (any dtype but bf16/fp16: fp8, fp8_e4m3, ...) in DeepSeek's
"FP8 with scale" layout, ``fp8_ds_mla``, not as eq. (2) at one byte: the latent's NoPE part as e4m3 with one fp32
scale per 128 values, the RoPE part left in bf16 (``latent_cache="fp8_ds_mla"``):

    ds_mla_bytes_per_token_layer = kv_lora_rank * 1 + kv_lora_rank / 128 * 4 + qk_rope_head_dim * 2         (7)

DeepSeek-V3.2: 512 + 16 + 128 = 656 B, + the 132-B indexer key of eq. (3) = 788 B per token and layer. (vllm 0.34.0
PyPI wheel: model_executor/layers/attention/mla_attention.py:367-383 ``_canonicalize_sparse_mla_kv_cache_dtype``
serves every quantized dtype but nvfp4_ds_mla as "fp8_ds_mla" on the FLASHMLA_SPARSE backend, whose
``supported_kv_cache_dtypes`` list "fp8" as its alias, v1/attention/backends/mla/flashmla_sparse.py:155-162; the
layout, flashmla_sparse.py:86-94; the row size ``get_fp8_ds_mla_row_bytes`` -> 656, v1/attention/backend.py:1017-1018,
given to the page size as ``state_content_bytes``, mla_attention.py:1581-1585. Earlier vLLM did the mapping in
model_executor/models/config.py ``DeepseekV32ForCausalLM`` @1936cf38.) SGLang stores an fp8_e4m3 cache of a DSA model in
the same 656-B row when its attention backend reads the scaled layout (flashmla_kv, its default below compute
capability 10.0) and as eq. (2) at one byte under trtllm (its default from 10.0) or on ROCm (sglang 0.5.23
mem_cache/kv_cache_configurator.py:3412-3475 ``calculate_mla_kv_cache_dim``; which engine and device takes which
layout: estimate/engines.py ``serving_profile``).

A sliding-window layer holds at most ``window + window_extra`` tokens per sequence (Beltagy et al. 2020,
Longformer; Jiang et al. 2023, Mistral 7B, section 2); each engine's extra is in its profile
(``estimate/engines.py``): transformers' storage holds ``window`` tokens while decoding, vLLM
window - 1 + max_num_batched_tokens, llama.cpp n_swa x (n_seq with one unified stream, else 1) + n_ubatch per
stream (``engines.llamacpp_kv_cells``).
Total = sum over layers of tokens_cached(layer) * bytes_per_token_layer * sequences; layers without attention
(``layer_types`` "none": Mamba / Gated DeltaNet / MLP-only layers of hybrid models) cache no keys or values --
their per-sequence state is in ``formulas/recurrent_state.py``; nor do layers that attend over an earlier layer's
cached keys and values (``ModelSpec.kv_shared_layers``, Gemma 3n's last ``num_kv_shared_layers``: transformers
cache_utils.py L1981-1985 gives them a ``DummyLayer``; vLLM skips a layer with ``kv_sharing_target_layer_name``;
llama.cpp ``hparams.has_kv(il)``), so the sum runs over ``ModelSpec.kv_cache_layer_types``.
transformers' Falcon with ``new_decoder_architecture`` (Falcon-40B/180B) broadcasts K/V to every query head in
``FalconAttention._split_heads`` before ``cache.update`` (modeling_falcon.py), so its DynamicCache holds num_heads
heads per token and layer (``repeated_kv``; measured in tests/formulas/test_kv_cache_forward.py); vLLM and llama.cpp
cache the model's num_kv_heads.
A KV cache dtype with one scale per token and KV head (vLLM ``int8_per_token_head``, ``fp8_per_token_head``) adds
``KV_DTYPE_HEAD_SCALE_BYTES`` (one float32) for the key and for the value of each KV head (one for MLA's latent):

    scale_bytes_per_token_layer = 2 * num_kv_heads * 4                                                  (5)

(vLLM vllm/v1/kv_cache_interface.py ``AttentionSpec.page_size_bytes`` L143-155: ``real_page_size +=
2 * block_size * num_kv_heads * get_dtype_size(torch.float32)`` when ``kv_quant_mode.is_per_token_head``, L30-49
and ``get_kv_quant_mode`` L57-67 @001cabc1.)

transformers' ``QuantizedCache`` with an integer backend (HQQ, quanto: ``QuantizedLayer``) stores each group of
``q_group_size`` quantized elements with its scale and zero point, and keeps the newest tokens in the activation
dtype until ``residual_length`` of them are due, then quantizes them with the rest (transformers 5.24.0
src/transformers/cache_utils.py ``QuantizedLayer.update`` L824-865: the residual is flushed when
``residual_length + new >= self.residual_length``, L854, so it holds at most residual_length - 1 tokens; defaults
``q_group_size=64``, ``residual_length=128``, L806-810; HQQ keeps ``meta["scale"]`` and ``meta["zero"]`` per group
in the compute dtype, ``HQQQuantizedLayer._quantize`` L988-1000; measured in tests/formulas/test_quantized_cache.py).
Per sequence and layer, with r = min(tokens, residual_tokens) tokens in the residual:

    quantized_cache_bytes = (tokens - r) * E * (b_q + group_param_bytes / q_group_size) + r * E * b_act    (6)

E the elements per token and layer (eq. 1 or 2 without the bytes), b_q the quantized bytes per element,
``group_param_bytes`` the scale and zero of one group (2 x b_act for HQQ).

Paged engines allocate whole blocks: tokens are rounded up to a multiple of ``block_size`` (vLLM,
Kwon et al. 2023, arXiv 2309.06180, section 4.2); a sliding layer's blocks may hold another number of tokens
(``sliding_block_size``: vLLM's unified page size for layers of different head sizes, estimate/inference/vllm.py).

A cross-attention layer (Llama-3.2-Vision) caches no text tokens; it keeps the keys and values of the image states,
``cross_tokens`` per sequence (images x tiles x (patches + 1), formulas/vision_tokens.py rule "mllama"):

    cross_kv_bytes = cross_layers * 2 * num_kv_heads * head_dim * cross_tokens * sequences * bytes_per_element   (4)

(transformers modeling_mllama.py MllamaTextCrossAttention: ``cache.update(key_states, value_states, layer_idx)``
with key_states [B, kv_heads, images x tiles x (patches + 1), head_dim]; measured in
tests/formulas/test_cross_attention_kv.py.)

A T5-style encoder-decoder (``ModelSpec.encoder_decoder``) caches in its decoder layers only: eq. (1) over the
target tokens generated so far (each decoder block's causal self-attention) plus eq. (4) with ``cross_tokens`` =
the source tokens (each decoder block's ``EncDecAttention`` projects the encoder output to K/V once and caches it);
the encoder layers run once over the source and cache nothing (``ModelSpec.kv_cache_layer_types``). transformers
v5.24.0 modeling_t5.py ``T5Attention.forward``: ``EncoderDecoderCache`` with ``self_attention_cache`` and
``cross_attention_cache`` [B, num_heads, tokens, d_kv] each; measured in tests/formulas/test_t5_kv_cache.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ..errors import InputError
from ..numbers import SEQUENCES_OR_ZERO, TOKENS_OR_ZERO
from ..specs import ModelSpec
from ..specs.workload import read_field
from ..suggest import did_you_mean
from .dtypes import DTYPE_BYTES

# bytes per element of each KV cache dtype; quantized llama.cpp types carry their block scale
# (ggml-common.h: q8_0 = 34 B / 32, q4_0 = 18 B / 32, q4_1 = 20 B / 32, q5_0 = 22 B / 32, q5_1 = 24 B / 32,
# iq4_nl = 18 B / 32).
KV_DTYPE_BYTES: dict[str, float] = {
    **{k: float(v) for k, v in DTYPE_BYTES.items()}, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0,
    "int8_per_token_head": 1.0, "fp8_per_token_head": 1.0,
    "q8_0": 34 / 32, "q5_1": 24 / 32, "q5_0": 22 / 32, "q4_1": 20 / 32, "q4_0": 18 / 32, "iq4_nl": 18 / 32,
}


# eq. (5): bytes of the scale each token keeps per KV head for its key and for its value (vLLM's per-token-head
# formats: one float32, vllm/v1/kv_cache_interface.py AttentionSpec.page_size_bytes @001cabc1)
KV_DTYPE_HEAD_SCALE_BYTES: dict[str, float] = {"int8_per_token_head": 4.0, "fp8_per_token_head": 4.0}


# bytes per element of the DSA indexer key cache, eq. (3): 'kv' = at the KV dtype (transformers); 'fp8_scaled' =
# FP8 plus one fp32 scale per 128 values (vLLM, SGLang)
INDEXER_CACHE_KINDS = ("kv", "fp8_scaled")
INDEXER_FP8_SCALE_BLOCK = 128
# eq. (7): how a DSA model's quantized latent is laid out; 'plain' = eq. (2) at the KV dtype's bytes, 'fp8_ds_mla' =
# the 656-B row of vLLM and SGLang for V3.2 (e4m3 NoPE + one fp32 scale per DS_MLA_SCALE_BLOCK + bf16 RoPE)
LATENT_CACHE_KINDS = ("plain", "fp8_ds_mla")
DS_MLA_SCALE_BLOCK = 128  # flashmla_sparse.py:90-91: "4 `float32` values ... the scale for the first 128"
DS_MLA_ROPE_BYTES = 2  # flashmla_sparse.py:93-94: "64 `bfloat16` values ... not quantized"


# the KV cache in the model's own (activation) dtype: vLLM vllm/utils/torch_utils.py kv_cache_dtype_str_to_dtype
# (``if kv_cache_dtype == "auto": return model_config.dtype``; vllm/config/cache.py CacheDType), SGLang
# model_executor/model_runner.py (``kv_cache_dtype == "auto"``: ``self.kv_cache_dtype = self.dtype``)
KV_DTYPE_AUTO = "auto"
# every KV cache dtype name a workload takes (kv_dtype_name); which of them an engine stores: estimate/inference/
# compose.py engine_kv_dtypes
KV_DTYPE_NAMES: tuple[str, ...] = (*sorted(KV_DTYPE_BYTES), KV_DTYPE_AUTO)


def kv_dtype_name(kv_dtype: str) -> str:
    """The canonical name of a KV cache dtype (``float16``/``f16`` -> ``fp16``, ...; ``auto`` stays ``auto``: it
    has no size until ``resolve_kv_dtype`` gives it the model's dtype); InputError if unknown."""
    key = kv_dtype.strip().lower().replace("-", "_")
    key = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "f16": "fp16", "f32": "fp32"}.get(key, key)
    if key not in KV_DTYPE_NAMES:
        raise InputError(f"unknown KV cache dtype {kv_dtype!r}{did_you_mean(key, KV_DTYPE_NAMES)} "
                         f"(known: {', '.join(KV_DTYPE_NAMES)})")
    return key


def resolve_kv_dtype(kv_dtype: str, model_dtype: str) -> str:
    """The canonical KV cache dtype, ``auto`` -> ``model_dtype`` (the model's activation dtype, KV_DTYPE_AUTO).

    >>> resolve_kv_dtype("auto", "float16"), resolve_kv_dtype("fp8", "bf16")
    ('fp16', 'fp8')
    """
    name = kv_dtype_name(kv_dtype)
    return kv_dtype_name(model_dtype) if name == KV_DTYPE_AUTO else name


def kv_dtype_bytes(kv_dtype: str) -> float:
    """Bytes per element of a KV cache dtype; ``auto`` must be resolved first (``resolve_kv_dtype``)."""
    name = kv_dtype_name(kv_dtype)
    if name == KV_DTYPE_AUTO:
        raise InputError("KV cache dtype 'auto' is the model's dtype: resolve it with the model (resolve_kv_dtype)")
    return KV_DTYPE_BYTES[name]


def kv_elements_per_token_layer(spec: ModelSpec, mla_mode: str = "latent", repeated_kv: bool = False,
                                kind: str = "sliding") -> int:
    """Elements one token occupies in one layer's cache: eq. (1) without the bytes, or eq. (2) for MLA.

    ``repeated_kv``: the engine runs a module that repeats K/V to every query head before caching when the model
    says so (``ModelSpec.kv_repeated_in_transformers``: transformers' Falcon with new_decoder_architecture), so
    eq. (1) counts num_heads heads. ``kind``: the layer's attention ("full" / "sliding"); eq. (1)'s head_dim is
    that layer kind's (``ModelSpec.kv_head_dim``: Gemma 4's full-attention layers cache global_head_dim-wide K and
    V, its sliding layers head_dim-wide ones)."""
    if spec.mla is not None:
        m = spec.mla
        if mla_mode == "latent":
            return m.kv_lora_rank + m.qk_rope_head_dim
        return spec.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) + spec.num_heads * m.v_head_dim
    heads = spec.num_heads if repeated_kv and spec.kv_repeated_in_transformers else spec.num_kv_heads
    return 2 * heads * spec.kv_head_dim(kind)


def indexer_bytes_per_token_layer(spec: ModelSpec, kv_dtype: str, indexer_cache: str = "kv") -> float:
    """Bytes of one token's DSA indexer key in one layer (eq. 3); 0 without an indexer."""
    m = spec.mla
    if m is None or not m.index_head_dim:
        return 0.0
    if indexer_cache == "fp8_scaled":
        return float(m.index_head_dim + m.index_head_dim // INDEXER_FP8_SCALE_BLOCK * 4)
    if indexer_cache != "kv":
        raise InputError(f"unknown indexer cache {indexer_cache!r}; known: {', '.join(INDEXER_CACHE_KINDS)}")
    return m.index_head_dim * kv_dtype_bytes(kv_dtype)


def ds_mla_bytes_per_token_layer(spec: ModelSpec, kv_dtype: str, latent_cache: str = "plain") -> float | None:
    """Bytes of one token's latent in one layer in the ``fp8_ds_mla`` layout (eq. 7), or None where eq. (2)
    applies: no DSA indexer, a 16/32-bit KV dtype, or ``latent_cache`` 'plain'."""
    if latent_cache not in LATENT_CACHE_KINDS:
        raise InputError(f"unknown latent cache {latent_cache!r}; known: {', '.join(LATENT_CACHE_KINDS)}")
    m = spec.mla
    if latent_cache == "plain" or m is None or not m.index_head_dim or kv_dtype_name(kv_dtype) in DTYPE_BYTES:
        return None
    return float(m.kv_lora_rank + math.ceil(m.kv_lora_rank / DS_MLA_SCALE_BLOCK) * 4
                 + m.qk_rope_head_dim * DS_MLA_ROPE_BYTES)


def sliding_tokens(tokens: int, window: int, window_extra: int) -> int:
    """Tokens a sliding-window layer keeps for a sequence of ``tokens``: min(tokens, window + extra)."""
    return min(tokens, max(window + window_extra, 1))


def paged_tokens(tokens: int, block_size: int | None) -> int:
    """Tokens rounded up to whole cache blocks (no rounding when block_size is None)."""
    if not block_size:
        return tokens
    return math.ceil(tokens / block_size) * block_size


@dataclass(frozen=True)
class KVCache:
    total_bytes: int
    bytes_per_token: float  # summed over the attention layers, for a sequence shorter than every window
    full_layers: int
    sliding_layers: int
    tokens_full: int  # tokens cached per sequence in a full-attention layer
    tokens_sliding: int  # tokens cached per sequence in a sliding layer
    # one token in one layer of each kind (they differ where the kinds' head sizes do: ModelSpec.full_head_dim)
    layer_bytes_per_token_full: float = 0.0
    layer_bytes_per_token_sliding: float = 0.0


@lru_cache(maxsize=8192, typed=True)  # a pure function of its arguments (the spec is frozen); KVCache is frozen
def kv_cache(spec: ModelSpec, tokens: int, sequences: int = 1, kv_dtype: str = "bf16", *,
             mla_mode: str = "latent", window_extra: int = -1, block_size: int | None = None,
             indexer_cache: str = "kv", repeated_kv: bool = False, q_group_size: int = 0,
             group_param_bytes: float = 0.0, residual_tokens: int = 0, residual_bytes: float = 0.0,
             sliding_block_size: int | None = None, latent_cache: str = "plain") -> KVCache:
    """KV cache of ``sequences`` sequences of ``tokens`` tokens each (module docstring, eqs. 1-3, 5; eq. 6 with
    ``q_group_size`` > 0: each group of that many elements carries ``group_param_bytes``, and up to
    ``residual_tokens`` of each sequence's tokens are held at ``residual_bytes`` per element instead).
    ``bytes_per_token`` is the quantized rate (one more token past the residual). ``sliding_block_size``: the
    tokens of a sliding layer's block where it differs from ``block_size`` (None: the same). ``latent_cache``: a DSA
    model's quantized latent layout (eq. 7, ``LATENT_CACHE_KINDS``)."""
    if not (type(tokens) is int and type(sequences) is int and 0 <= tokens <= TOKENS_OR_ZERO.high
            and 0 <= sequences <= SEQUENCES_OR_ZERO.high):  # the estimates' case answered without a call
        # a Python caller's NaN, inf, None, -1 or "8k": one FieldError naming the argument (the workloads' entry
        # check, specs/workload.py read_field), not a ValueError from int(nan) or a TypeError from None < 0
        tokens = int(read_field(tokens, "tokens", TOKENS_OR_ZERO))
        sequences = int(read_field(sequences, "sequences", SEQUENCES_OR_ZERO))
    per_elem = kv_dtype_bytes(kv_dtype) + (group_param_bytes / q_group_size if q_group_size > 0 else 0.0)
    ds_mla = ds_mla_bytes_per_token_layer(spec, kv_dtype, latent_cache) if mla_mode == "latent" else None

    def rate(kind: str) -> tuple[int, float]:  # (elements, bytes) of one token in one layer of that kind
        elems = kv_elements_per_token_layer(spec, mla_mode, repeated_kv, kind)
        if ds_mla is not None:  # eq. (7) + the indexer key of eq. (3)
            return elems, ds_mla + indexer_bytes_per_token_layer(spec, kv_dtype, indexer_cache)
        scale_heads = 1 if spec.mla is not None else elems // (2 * max(spec.kv_head_dim(kind), 1))  # eq. (5)
        return elems, (elems * per_elem + 2 * scale_heads * KV_DTYPE_HEAD_SCALE_BYTES.get(kv_dtype_name(kv_dtype), 0.0)
                       + indexer_bytes_per_token_layer(spec, kv_dtype, indexer_cache))
    (elems_full, per_full), (elems_slide, per_slide) = rate("full"), rate("sliding")
    own = spec.kv_cache_layer_types  # layers caching K/V of their own
    n_sliding = own.count("sliding")
    n_full = own.count("full")
    t_full = paged_tokens(tokens, block_size)
    t_slide = (paged_tokens(sliding_tokens(tokens, spec.sliding_window or 0, window_extra),
                            block_size if sliding_block_size is None else sliding_block_size) if n_sliding else 0)
    if per_full == per_slide:  # one rate for every layer (all but Gemma 4): summed as one product
        total = (n_full * t_full + n_sliding * t_slide) * per_full * sequences
        per_token = per_full * (n_full + n_sliding)
    else:
        total = (n_full * t_full * per_full + n_sliding * t_slide * per_slide) * sequences
        per_token = per_full * n_full + per_slide * n_sliding
    if residual_tokens > 0:  # eq. (6): the newest tokens of each sequence in the activation dtype, not quantized
        held_full, held_slide = n_full * min(t_full, residual_tokens), n_sliding * min(t_slide, residual_tokens)
        if elems_full == elems_slide:
            total += (held_full + held_slide) * sequences * elems_full * (residual_bytes - per_elem)
        else:
            total += (held_full * elems_full + held_slide * elems_slide) * sequences * (residual_bytes - per_elem)
    return KVCache(
        total_bytes=int(math.ceil(total)), bytes_per_token=per_token,
        full_layers=n_full, sliding_layers=n_sliding, tokens_full=t_full, tokens_sliding=t_slide,
        layer_bytes_per_token_full=per_full, layer_bytes_per_token_sliding=per_slide,
    )


def cross_attention_kv(spec: ModelSpec, cross_tokens: int, sequences: int, kv_dtype: str) -> int:
    """Eq. (4): bytes of the image keys and values the cross-attention layers hold for ``sequences`` sequences of
    ``cross_tokens`` image states each."""
    per = spec.cross_attention_layer_count * 2 * spec.num_kv_heads * spec.head_dim
    return math.ceil(per * cross_tokens * sequences * kv_dtype_bytes(kv_dtype))
