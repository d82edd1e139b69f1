"""Bytes of every weight tensor under each deployable format.

A format decides, per tensor, the storage type and the bytes of its scales/zeros. Which tensors a
format leaves unquantized follows the tool that produces it:

================  ==========================================================================================
format            rule and reference
================  ==========================================================================================
fp32/fp16/bf16    every tensor at 4/2/2 bytes per element.
fp8               e4m3, 1 B/element + one fp32 scale per tensor; attention/MLP/expert matrices only;
                  embeddings, lm_head, router and norms stay 16-bit (vLLM ``fp8.py`` Fp8LinearMethod;
                  llm-compressor FP8 scheme ignores ``lm_head``).
fp8-block         e4m3 with one fp32 scale per 128x128 block (DeepSeek-V3 ``weight_block_size``
                  [128, 128]; ``weight_scale_inv`` tensors of ceil(out/128) x ceil(in/128)).
int8              weight-only int8, one fp16 scale per output channel (compressed-tensors W8A16).
llm.int8          bitsandbytes ``Linear8bitLt``: int8 ``CB`` + fp32 ``SCB`` per output row (Dettmers et al.
                  2022, arXiv 2208.07339); every ``nn.Linear`` except ``lm_head`` (transformers
                  ``get_keys_to_not_convert``); ``fused_experts`` as for nf4/fp4.
gptq-int4/int8    packed ``qweight`` (bits/8 B/elem), ``qzeros`` packed int32 (bits/8 B per group x out),
                  fp16 ``scales`` per group x out, int32 ``g_idx`` per input feature (AutoGPTQ/GPTQModel
                  ``QuantLinear``); decoder-layer linears only (not router, embeddings, lm_head, vision).
awq-int4          packed ``qweight`` 0.5 B/elem, ``qzeros`` packed (0.5 B per group x out), fp16 ``scales``
                  per group x out (AutoAWQ ``WQLinear_GEMM``); same modules as GPTQ.
nf4/fp4 (-dq)     bitsandbytes ``Linear4bit``: 0.5 B/elem + fp32 absmax per 64-element block; with double
                  quantization (``-dq``) absmax becomes uint8 plus one fp32 absmax per 256 blocks and a
                  256-entry fp32 code (Dettmers et al. 2023, QLoRA, arXiv 2305.14314, section 3
                  "Double Quantization": 0.5 -> 0.127 bits/param). Every Linear except lm_head; with
                  ``fused_experts`` (transformers 5, formulas/nf4_quantization.py) routed experts and router
                  stay in the unquantized dtype too (fused nn.Parameters, not nn.Linear); the flag is set by
                  ``nf4_quantization.fused_experts_kept`` alone (QLoRA bases, serving on transformers).
mxfp4             OCP MX FP4: 32 elements share an E8M0 scale, 17 B/32 elem (gpt-oss ``modules_to_not_convert``:
                  attention, router, embeddings, lm_head stay bf16; experts only).
nvfp4             NVIDIA ModelOpt NVFP4 (quant_algo NVFP4): packed E2M1 values (0.5 B/elem), one fp8 E4M3 scale per
                  16 elements of a row, two fp32 scalars per matrix (``nvfp4_matrix_bytes``, eq. N1); the
                  attention/MLP/expert matrices, as fp8; embeddings, lm_head, router and norms stay 16-bit.
compressed-       a compressed-tensors checkpoint (llm-compressor / RedHatAI W4A16, W8A16, FP8, W8A8, NVFP4; Kimi-K2-Thinking
tensors           INT4): each matrix by the config group that quantizes it, as compressed-tensors 0.20.1's compressor
                  stores it (formulas/compressed_tensors.py ``ct_matrix_bytes``); sized from the checkpoint's own
                  quantization_config only (a model without one is refused); the rest in the checkpoint's dtype.
gguf:<ftype>      llama.cpp file types (q8_0, q6_k, q5_k_m, q4_k_m, q4_0, q3_k_m, q2_k, iq4_xs, ...): the
                  per-tensor type chosen by ``llama_tensor_get_type_impl`` in ``src/llama-quant.cpp``
                  (mixtures, ``use_more_bits``, output/tied-embedding rule, shape fallbacks), block sizes
                  from ``ggml_types.json``; 1-D tensors and the router stay F32. Experts a checkpoint ships in
                  MXFP4 (gpt-oss) stay MXFP4 in every file type, f16/bf16 included (``conversion/gpt_oss.py``
                  writes them raw; llama-quantize refuses to requantize them).
================  ==========================================================================================
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from itertools import chain
from typing import Any

from ..errors import InputError
from ..specs import ModelSpec
from ..suggest import did_you_mean
from .compressed_tensors import CT_METHOD, CTConfig, ct_config, ct_matrix_bytes, ct_scheme_of
from .dtypes import DTYPE_BYTES
from .modelopt_exclusions import (
    MODELOPT_FAMILIES,
    excluded_roles,
    modelopt_exclude_list,
    modelopt_quant_algo,
    quantized_vision_refusal,
    vision_quantized,
)
from .params import routed_share
from .tensors import Tensor, layer_groups, model_tensors

QUANT_COMPONENTS = {"attention", "recurrent", "mlp", "experts", "shared_experts"}

# llama.cpp file type -> default tensor type (llama-quant.cpp llama_ftype_get_default_type)
GGUF_FTYPES: dict[str, str] = {
    "f32": "F32", "f16": "F16", "bf16": "BF16", "q8_0": "Q8_0", "q4_0": "Q4_0", "q4_1": "Q4_1",
    "q5_0": "Q5_0", "q5_1": "Q5_1", "q2_k": "Q2_K", "q2_k_s": "Q2_K", "q3_k_s": "Q3_K", "q3_k_m": "Q3_K",
    "q3_k_l": "Q3_K", "q4_k_s": "Q4_K", "q4_k_m": "Q4_K", "q5_k_s": "Q5_K", "q5_k_m": "Q5_K", "q6_k": "Q6_K",
    "iq4_xs": "IQ4_XS", "iq4_nl": "IQ4_NL", "iq3_m": "IQ3_S", "iq3_s": "IQ3_S", "iq3_xxs": "IQ3_XXS",
    "iq2_m": "IQ2_S", "iq2_xxs": "IQ2_XXS", "mxfp4_moe": "MXFP4",
}

# The group size of a grouped format (GPTQ, AWQ) when neither the checkpoint nor the user states one: the default of
# transformers' GPTQConfig and AwqConfig (transformers 5.24.0 utils/quantization_config.py L687 and L822,
# ``group_size: int = 128``). Every size of a format taken without a stated group is at it: ``weight_bytes``'s
# default, ``stored_format``'s (a format with no groups reports it too), the format ladder estimate/formats.py
# compares rungs by, and the workload's default (specs/workload.py ``InferenceWorkload.group_size``, a floor below
# this one: tests/formulas/test_weight_format_defaults.py checks that the two agree).
GROUP_SIZE_DEFAULT = 128
# The element size of the tensors a quantized format leaves unquantized (embeddings, lm_head, norms, router) when
# they are loaded in a 16-bit dtype (bf16 or fp16): what an estimate holds them in unless the compute dtype is fp32
# (estimate/inference/compose.py ``_compute_dtype``: bf16, or fp16 for a float16 checkpoint or AWQ; fp32 only for an fp32
# format or when asked). ``weight_bytes``'s default and the format ladder's.
OTHER_BYTES_DEFAULT = DTYPE_BYTES["bf16"]

FORMAT_BITS_HINT = {  # nominal bits per quantized weight, for ordering formats by precision
    "fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "fp8-block": 8, "int8": 8, "llm.int8": 8, "gptq-int8": 8,
    "gptq-int4": 4, "awq-int4": 4, "nf4": 4, "nf4-dq": 4, "fp4": 4, "fp4-dq": 4, "mxfp4": 4, "nvfp4": 4,
    CT_METHOD: 0,  # per config group: the checkpoint's num_bits (formulas/compressed_tensors.py)
}


@lru_cache(maxsize=1)
def ggml_types() -> dict[str, dict[str, Any]]:
    text = resources.files("llmsizer.catalog.data").joinpath("ggml_types.json").read_text("utf-8")
    types: dict[str, dict[str, Any]] = json.loads(text)["types"]
    return types


def ggml_tensor_bytes(ggml_type: str, numel: int) -> int:
    """Bytes of ``numel`` elements stored as GGML type ``ggml_type`` (numel / block x bytes per block)."""
    t = ggml_types()[ggml_type]
    return math.ceil(numel / t["block"]) * t["bytes"]


def format_names() -> list[str]:
    """Every weight format name llmsizer knows: the named formats, then the GGUF types as ``gguf:NAME``."""
    return sorted(FORMAT_BITS_HINT) + [f"gguf:{k}" for k in sorted(GGUF_FTYPES)]


# other names a user writes for a format: each resolves to one format, and an estimate names the resolution
# (estimate/formats.py engine_weights: "alias 'int4' -> gptq-int4"), since 'int4' could as well mean AWQ or nf4
FORMAT_ALIASES = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "int4": "gptq-int4",
                  "gptq": "gptq-int4", "awq": "awq-int4", "bnb-nf4": "nf4", "bnb-4bit": "nf4", "qlora": "nf4-dq",
                  "bnb-8bit": "llm.int8", "llm-int8": "llm.int8", "fp8-e4m3": "fp8", "e4m3": "fp8", "int8-wo": "int8",
                  "modelopt-fp4": "nvfp4"}


def _spelling(name: str) -> str:
    """``name`` lower-cased, '_' as '-' outside the GGUF names (their types keep '_')."""
    n = name.strip().lower()
    return n if n.startswith(("gguf", "q", "iq")) else n.replace("_", "-")


def format_alias(name: str) -> str | None:
    """The format ``name`` is an alias of (``FORMAT_ALIASES``: 'int4' -> 'gptq-int4'), or None when it is a format's
    own name (in any case, or 'gguf-q4_k_m' for 'gguf:q4_k_m')."""
    return FORMAT_ALIASES.get(_spelling(name))


@lru_cache(maxsize=1024)  # a pure function of the name (unknown names raise, and are not cached)
def normalize_format(name: str) -> str:
    """Canonical format name; accepts 'Q4_K_M', 'gguf-q4_k_m' and the ``FORMAT_ALIASES`` ('int4'). Unknown ->
    InputError."""
    n = _spelling(name)
    n = FORMAT_ALIASES.get(n, n)
    if n in FORMAT_BITS_HINT:
        return n
    g = n.removeprefix("gguf:").removeprefix("gguf-").replace("-", "_")
    if g in GGUF_FTYPES:
        return "gguf:" + g
    hint = did_you_mean(name.strip(), [*FORMAT_BITS_HINT, *GGUF_FTYPES])  # 'q4_k_n' -> 'q4_k_m', as written
    raise InputError(f"unknown weight format {name!r}{hint} (known: {', '.join(format_names())})")


@lru_cache(maxsize=256)
def largest_quantized_matrix(spec: ModelSpec, fmt: str, fused_experts: bool = False) -> int:
    """Elements of the largest single matrix a format quantizes (its dequantization buffer size); memoized per
    model. ``fused_experts``: routed experts and router are not quantized (``bnb_quantizes``)."""
    best = 0
    skip = FUSED_KEPT if fused_experts else frozenset()
    head, groups, tail = layer_groups(spec)  # a layer's tensors are its kind's (the first layer's, re-stamped)
    for _role, comp, shape, count, _layer, numel in chain(head, chain.from_iterable(g[1] for g in groups),
                                                          chain.from_iterable(s[0] for s in tail)):
        if len(shape) == 2 and min(shape) > 1 and comp not in ("embedding", "lm_head", "vision",
                                                                     "per_layer_embedding"):  # Tensor.matrix
            if comp not in skip:
                best = max(best, numel // count)
    return best


@lru_cache(maxsize=256)
def largest_quantized_layer(spec: ModelSpec) -> int:
    """Elements of the decoder layer whose quantized matrices (as :func:`largest_quantized_matrix` counts them) add
    up to the most: what one layer's dequantized copies take when all of them are alive at once."""
    by_layer: dict[int, int] = {}
    for _role, comp, shape, _count, layer, numel in model_tensors(spec):
        if len(shape) == 2 and min(shape) > 1 and comp not in ("embedding", "lm_head", "vision") and layer >= 0:
            by_layer[layer] = by_layer.get(layer, 0) + numel
    return max(by_layer.values(), default=0)


@dataclass(frozen=True)
class WeightBytes:
    """Weight memory of a model under one format."""

    format: str
    total: int
    by_component: dict[str, int]
    by_storage: dict[str, int]  # storage type -> bytes (e.g. 'Q6_K', 'int4+scales', 'bf16')
    notes: tuple[str, ...] = field(default=())
    layer_bytes: tuple[int, ...] = ()  # bytes of each decoder layer (for partial offload)
    layer_expert_bytes: tuple[int, ...] = ()  # of each layer's bytes: routed experts (llama.cpp --n-cpu-moe)
    layer_matrix_bytes: tuple[int, ...] = ()  # of each layer's bytes: other 2-D matrices (llama.cpp row split)


def _bnb4(numel: int, double_quant: bool) -> int:
    """bitsandbytes 4-bit tensor: packed data + absmax (+ nested absmax and code with double quant)."""
    blocks = math.ceil(numel / 64)
    packed = math.ceil(numel / 2)
    code = 16 * 4  # the 16-entry fp32 NF4/FP4 lookup table kept per tensor (QuantState.code)
    if not double_quant:
        return packed + blocks * 4 + code
    return packed + blocks * 1 + math.ceil(blocks / 256) * 4 + 256 * 4 + 4 + code


def bnb4_matrix_bytes(numel: int, fmt: str) -> int:
    """One bitsandbytes 4-bit matrix of ``numel`` elements in ``fmt`` ('nf4', 'nf4-dq', 'fp4', 'fp4-dq'): for a
    matrix a quantizer takes beyond this table's rule (Lightning Fabric's lm_head, formulas/nf4_quantization.py)."""
    return _bnb4(numel, fmt.endswith("-dq"))


# NVFP4 (NVIDIA ModelOpt quant_algo "NVFP4"): the tensors an NVFP4 linear of N outputs and K inputs holds, as vLLM
# 0.19.1 creates them (PyPI wheel, sha256 71a87f46..., vllm/model_executor/layers/quantization/modelopt.py
# ``ModelOptNvFp4LinearMethod.create_weights`` :1079-1151): ``weight`` uint8 [N, K / 2] (two E2M1 values per byte,
# :1109-1120), ``input_scale`` and ``weight_scale_2`` fp32 [one per fused shard] (:1123-1133: one each per checkpoint
# matrix), ``weight_scale`` float8_e4m3fn [N, K / group_size] (:1136-1147); K must be a multiple of 16 (:1101-1104).
# The fused MoE method holds the same per expert matrix (``ModelOptNvFp4FusedMoE.create_weights`` :1227-1341:
# w13_weight [E, 2 I, H / 2], w2_weight [E, H, I / 2] uint8; w13_weight_scale [E, 2 I, H / gs], w2_weight_scale
# [E, H, I / gs] fp8; w13_weight_scale_2 / w13_input_scale [E, 2], w2_weight_scale_2 / w2_input_scale [E] fp32).
# SGLang 0.5.23 creates the same tensors (PyPI wheel, sha256 00b3cd5b..., sglang/srt/layers/quantization/
# modelopt_quant.py ``ModelOptFp4LinearMethod.create_weights`` :1796-1884, ``ModelOptNvFp4FusedMoEMethod.
# create_weights`` :2467-2620). So per matrix of N x K, the group g = 16:
#
#     B_nvfp4(N, K) = N * K / 2  +  N * K / g  +  2 * 4                                          (N1)
#
# i.e. 4.5 bits per weight plus 8 B. The group is NVFP4's 16-element block (the OCP/NVIDIA NVFP4 layout; vLLM's
# default, modelopt.py:1040-1041; SGLang's Marlin path refuses any other, modelopt_quant.py:1920-1923), so a
# checkpoint stating another is refused (``stored_format``). After loading, the kernels re-lay the same bytes: on
# CUTLASS/FlashInfer (compute capability 10.x/12.x) the scales are swizzled into [round_up(N, 128),
# round_up(K / g, 4)] and the values padded to N, K multiples of 32 (quantization/utils/nvfp4_utils.py
# ``swizzle_blockscale`` :272-310, ``pad_nvfp4_weight_for_cutlass`` :323-357), replacing the loaded tensors; on
# Marlin (below 10.0) they are repacked at the same sizes (marlin_utils_fp4.py ``prepare_fp4_layer_for_marlin``
# :206-281); the two fp32 scalars become four (alpha, the global scales and an inverse: modelopt.py:1153-1176).
# Eq. N1 leaves these out: that padding is zero when each rank's N is a multiple of 128 and K a multiple of 64 (the
# catalogued Qwen3-235B-A22B NVFP4 release at tensor parallel 1-8; at 16 its experts' 2 I / 16 = 192 rows are not,
# and the MoE kernels' own re-layout, fused_moe/oracle/nvfp4.py ``convert_to_nvfp4_moe_kernel_format`` :266-, was
# not read for padding), and the scalars differ by a few bytes per layer.
NVFP4_GROUP_SIZE = 16
NVFP4_SCALAR_BYTES = 2 * 4  # input_scale + weight_scale_2, fp32, per matrix


def nvfp4_matrix_bytes(out_features: int, in_features: int, group_size: int = NVFP4_GROUP_SIZE) -> int:
    """Bytes of one NVFP4 matrix of ``out_features`` x ``in_features`` (eq. N1 above): packed E2M1 values, an fp8
    E4M3 scale per ``group_size`` inputs of a row, and the two fp32 per-tensor scales. Example: a 4096 x 4096
    projection, 4096 * 2048 + 4096 * 256 + 8 = 9,437,192 B (4.5 bits per weight)."""
    return (out_features * math.ceil(in_features / 2) + out_features * math.ceil(in_features / group_size)
            + NVFP4_SCALAR_BYTES)


BNB_FORMATS = ("llm.int8", "nf4", "nf4-dq", "fp4", "fp4-dq")  # bitsandbytes Linear8bitLt / Linear4bit
BNB_KEPT = frozenset({"embedding", "lm_head", "per_layer_embedding"})  # get_keys_to_not_convert; not nn.Linear
FUSED_KEPT = frozenset({"experts", "router"})  # transformers 5 nn.Parameters (formulas/nf4_quantization.py)


def bnb_quantizes(t: Tensor, fused_experts: bool = False) -> bool:
    """Whether bitsandbytes' 4-bit/8-bit replacement takes tensor ``t``: every 2-D linear weight except the
    embeddings and lm_head; with ``fused_experts`` (transformers 5 ``replace_with_bnb_linear``) not the routed
    experts and router either, which are fused ``nn.Parameter``s there. Qwen2-MoE/Qwen3-Next's
    ``shared_expert_gate`` is an ``nn.Linear(H, 1)``: a 1-row matrix, quantized too."""
    linear = t.matrix or t.role == "ffn_gate_inp_shexp"
    return linear and t.component not in BNB_KEPT and not (fused_experts and t.component in FUSED_KEPT)


def _tensor_bytes_simple(fmt: str, t: Tensor, group_size: int, other_bytes: int = 2,
                         fused_experts: bool = False) -> tuple[int, str]:
    """Bytes of one tensor group under a non-GGUF format, and the storage label."""
    out_f = t.shape[0]
    in_f = t.shape[1] if len(t.shape) == 2 else 1
    n = t.numel
    per = n // t.count
    if fmt in DTYPE_BYTES:
        return n * DTYPE_BYTES[fmt], fmt
    quantizable = t.matrix and t.component in QUANT_COMPONENTS
    if fmt in BNB_FORMATS:
        quantizable = bnb_quantizes(t, fused_experts)
    if fmt == "mxfp4":
        quantizable = t.matrix and t.component == "experts"
    if not quantizable:
        return n * other_bytes, _STORAGE_LABEL.get(other_bytes, "other")
    if fmt == "fp8":
        return n + 4 * t.count, "fp8"
    if fmt == "fp8-block":
        return n + 4 * math.ceil(out_f / 128) * math.ceil(in_f / 128) * t.count, "fp8"
    if fmt == "int8":
        return n + 2 * out_f * t.count, "int8"
    if fmt == "llm.int8":
        return n + 4 * out_f * t.count, "int8"
    if fmt in ("gptq-int4", "gptq-int8", "awq-int4"):
        bits = 8 if fmt.endswith("8") else 4
        groups = math.ceil(in_f / group_size)
        qweight = math.ceil(per * bits / 8)
        qzeros = math.ceil(groups * out_f * bits / 8)
        scales = groups * out_f * 2
        g_idx = in_f * 4 if fmt.startswith("gptq") else 0
        return (qweight + qzeros + scales + g_idx) * t.count, f"int{bits}"
    if fmt in ("nf4", "nf4-dq", "fp4", "fp4-dq"):
        return _bnb4(per, fmt.endswith("-dq")) * t.count, fmt.split("-")[0]
    if fmt == "mxfp4":
        return ggml_tensor_bytes("MXFP4", per) * t.count, "mxfp4"
    if fmt == "nvfp4":
        return nvfp4_matrix_bytes(out_f, in_f) * t.count, "nvfp4"
    raise InputError(f"unknown weight format {fmt!r}")


# Tensors a serving engine builds in a dtype of its own, whatever the checkpoint's format: role -> bytes per element
# (None: unquantized, in the compute dtype ``other_bytes``). DeepSeek-V3.2's DSA indexer ``weights_proj``
# (llmsizer role ``indexer_proj``, [index_n_heads, hidden]):
#   vllm 0.19.1 (PyPI wheel) vllm/model_executor/models/deepseek_v2.py:635-655 ``weights_proj =
#     ReplicatedLinear(hidden_size, n_head, bias=False, quant_config=None)``: no fp8, the model dtype (bf16);
#   sglang 0.5.6 (PyPI wheel) python/sglang/srt/layers/attention/nsa/nsa_indexer.py:149-155 ``ReplicatedLinear(...,
#     params_dtype=torch.float32, quant_config=None)``: fp32 (the checkpoint's tensor is cast on load).
# and its key LayerNorm ``k_norm`` (role ``indexer_k_norm``, weight and bias of [index_head_dim]): sglang 0.5.6
#   nsa_indexer.py:156 ``LayerNorm(self.head_dim, dtype=torch.float32)``, whose weight and bias are built in that
#   dtype (sglang/srt/layers/layernorm.py:288-305): fp32. The indexer's ``wk`` ([index_head_dim, hidden]) is NOT
#   the engine's own: nsa_indexer.py:141-147 builds it with the model's ``quant_config`` (passed by
#   models/deepseek_v2.py:1253-1266), so an fp8 checkpoint's wk is fp8 as the format rule sizes it; likewise wq_b
#   (:133-139).
ENGINE_TENSOR_BYTES: dict[str, dict[str, int | None]] = {
    "vllm": {"indexer_proj": None},
    "sglang": {"indexer_proj": 4, "indexer_k_norm": 4, "indexer_k_norm.bias": 4}}
# The same for one model type on one engine: (engine, model_type) -> role -> bytes per element, over the engine's
# own. GLM-4.5's router (glm4_moe, role ``ffn_gate_inp`` [n_routed_experts, hidden]):
#   vllm 0.19.1 (PyPI wheel) vllm/model_executor/models/glm4_moe.py:143-148 ``self.gate = nn.Linear(hidden_size,
#     n_routed_experts, bias=False, dtype=torch.float32)``: fp32 whatever the checkpoint's dtype or quantization
#     (no quant_config; the forward casts the hidden states to fp32, :208); every rank holds it whole
#     (``REPLICATED_MATRICES``). Its ``e_score_correction_bias`` (:149-151, fp32 [n_routed_experts]): not in the
#     parameter inventory, counted by ``correction_bias_bytes`` below.
#   Not on the other engines or families read (the router in the model dtype): sglang 0.5.6 models/glm4_moe.py:332-337
#   ``Glm4MoeGate.weight = nn.Parameter(torch.empty((n_routed_experts, hidden)))`` in the default (model) dtype;
#   vllm 0.19.1 deepseek_v2.py:263-267 ``GateLinear`` with no params_dtype (the model dtype; DeepSeek-V2/V3, Kimi-K2,
#   DeepSeek-V3.2), qwen3_moe.py:176, qwen2_moe.py:135, qwen3_next.py:118, mixtral.py:120 ReplicatedLinear, gpt_oss.py:177
#   GateLinear (model dtype). vLLM's nemotron_h.py:151-157 ``GateLinear(..., force_fp32_compute=True)`` stores fp32
#   only on a device without its specialized router kernels: a device rule (``VLLM_FP32_GATE``,
#   ``vllm_gate_fp32``).
# transformers 5.24.0 (PyPI wheel) keeps the router in fp32 for the families whose PreTrainedModel names it in
#   ``_keep_in_fp32_modules_strict``: modeling_utils.py:3854-3856 ``_get_dtype_plan`` maps each entry to float32 when
#   the load dtype is fp16 or bf16, and core_model_loading.py:1879-1922 casts every checkpoint tensor whose name
#   matches it (a regex search: ``gate.weight`` matches ``mlp.gate.weight`` / ``mixer.gate.weight``, the router, not
#   ``gate_proj``); the routers are TopkRouter ``nn.Parameter``s, no Linear a quantizer replaces. ["gate.weight"]
#   in deepseek_v2/modeling_deepseek_v2.py:483, ["e_score_correction_bias", "gate.weight"] in
#   deepseek_v3/modeling_deepseek_v3.py:551, deepseek_v32/modeling_deepseek_v32.py:664,
#   glm4_moe/modeling_glm4_moe.py:460, nemotron_h/modeling_nemotron_h.py:1012 (the bias a buffer:
#   ``correction_bias_bytes``). At fp32 the rule is moot (4 bytes either way).
_TRANSFORMERS_FP32_ROUTER: dict[str, int | None] = {"ffn_gate_inp": 4}
# Nemotron-H's router on SGLang: the model dtype, as SGLang 0.5.23 stores it, the release the SGLang profile follows
#   (estimate/engines.py ``CURRENT_VERSION``): sglang 0.5.23 (PyPI wheel, sha256 00b3cd5b...) models/nemotron_h.py:265-271
#   ``self.gate = ReplicatedLinear(config.hidden_size, config.n_routed_experts, bias=False, quant_config=None)``, no
#   params_dtype, so layers/linear.py:264-265 ``params_dtype = torch.get_default_dtype()`` (the model dtype); fp32 is
#   only the matmul's output (``out_dtype=torch.float32``, nemotron_h.py:390, :422, :447). Older: sglang 0.5.6 (PyPI
#   wheel) models/nemotron_h.py:141-148 built it with ``params_dtype=torch.float32`` (fp32 on every device). Not
#   selected by engine_version: a version resolves to (major, minor) (engines.py ``release``), and both are 0.5, so
#   every 0.5.x takes the 0.5.23 rule (an SGLang 0.5.6 user's router is 23 x 128 x 2688 x 2 B more for Nemotron 3
#   Nano). vLLM's is device-dependent: ``vllm_gate_fp32`` below.
ENGINE_MODEL_TENSOR_BYTES: dict[tuple[str, str], dict[str, int | None]] = {
    ("vllm", "glm4_moe"): {"ffn_gate_inp": 4},
    # MiniMax-M2's router (``mlp.gate`` [num_local_experts, hidden]) on both serving engines: vllm 0.19.1 (PyPI wheel,
    # sha256 71a87f46...) models/minimax_m2.py:113-120 and sglang 0.5.23 (PyPI wheel) models/minimax_m2.py:556-563
    # ``self.gate = ReplicatedLinear(hidden_size, num_local_experts, bias=False, params_dtype=torch.float32,
    # quant_config=None)``: fp32 whatever the checkpoint (its FP8 release keeps ``gate`` out of the FP8 layers,
    # modules_to_not_convert). transformers 5.24 keeps it in the load dtype (MiniMaxM2TopKRouter, no
    # _keep_in_fp32_modules_strict: modeling_minimax_m2.py L46-65)
    **{(e, "minimax_m2"): {"ffn_gate_inp": 4} for e in ("vllm", "sglang")},
    **{("transformers", t): _TRANSFORMERS_FP32_ROUTER
       for t in ("deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe", "nemotron_h")}}


# The router's score-correction bias (``MoESpec.score_correction_bias``: DeepSeek-V3's auxiliary-loss-free balancing,
# arXiv 2412.19437 section 2.1.2 eq. 16, a bias per routed expert added to its affinity for the top-k choice): a
# buffer in transformers, so not in the tensor inventory (formulas/tensors.py) or the parameter count, but allocated
# beside the weights, fp32 [n_routed_experts] in each MoE layer, whole on every rank (no engine shards it):
#   transformers 5.24.0 (.venv): ``self.e_score_correction_bias = nn.Buffer(torch.zeros(self.num_experts,
#     dtype=torch.float32))`` (persistent) in deepseek_v3/modeling_deepseek_v3.py:131, deepseek_v32/
#     modeling_deepseek_v32.py:509, glm4_moe/modeling_glm4_moe.py:280, nemotron_h/modeling_nemotron_h.py:770,
#     whatever the config's topk_method, kept fp32 at a bf16/fp16 load by ``_keep_in_fp32_modules_strict`` (:551,
#     :664, :460, :1012); not in deepseek_v2 (its router has no bias);
#   vllm 0.19.1 (PyPI wheel) models/deepseek_v2.py:268-273 ``self.gate.e_score_correction_bias = nn.Parameter(
#     torch.empty(config.n_routed_experts, dtype=torch.float32))`` only where ``topk_method == "noaux_tc"`` (else
#     None; DeepSeek-V2/V3/V3.2, Kimi-K2), glm4_moe.py:149-151 and nemotron_h.py:159-161 always, fp32;
#   sglang 0.5.6 (PyPI wheel) models/deepseek_v2.py:526-538 (``MoEGate``: only where ``topk_method == "noaux_tc"``,
#     fp32; bf16 for a modelopt_fp4 checkpoint on the flashinfer-trtllm MoE runner, a format not modelled here),
#     glm4_moe.py:335-337 (``Glm4MoeGate``) and nemotron_h.py:149-151 always, fp32.
#   llama.cpp keeps the GGUF's ``exp_probs_b`` F32 tensor (a file's bytes hold it); from a config it is not counted.
# Families vLLM 0.19.1 also builds the bias for, none in the catalog today (a config of these model types read with
# --engine vllm gets 0 bytes here; add the type above with its dtype when one is catalogued), models/: fp32 in
# AXK1.py:127, ernie45_moe.py:172, ernie45_vl_moe.py:226 ([2, E]), exaone_moe.py:95, lfm2_moe.py:142,
# openpangu.py:169, sarvam.py:311; the default dtype in dots1.py:141, kimi_linear.py:133; the
# router's dtype in longcat_flash.py:259 (fp32 where the config says router_dtype float32, :284-286) and mimo_v2_flash.py:156;
# afmoe.py:143, bailing_moe.py:299 and step3p5.py:388 pass a bias parameter of their own to the router.
# MiniMax-M2 (minimax_m2): vllm 0.19.1 models/minimax_m2.py:88-97 and sglang 0.5.23 models/minimax_m2.py:525-534
#   ``nn.Parameter(torch.empty(config.num_local_experts, dtype=torch.float32))`` where config.use_routing_bias (the
#   published configs: true), else None. transformers 5.24 builds it always but in the load dtype
#   (``nn.Buffer(torch.zeros(config.num_local_experts))``, modeling_minimax_m2.py L114, in no fp32 list: bf16 at a
#   bf16 load, 2 x 256 x 62 = 31,744 B for MiniMax-M2.x): ``CORRECTION_BIAS_IN_LOAD_DTYPE``.
CORRECTION_BIAS_BYTES = 4  # fp32 on every engine above
CORRECTION_BIAS_IN_LOAD_DTYPE = frozenset({("transformers", "minimax_m2")})
_CORRECTION_BIAS_TYPES: dict[str, frozenset[str]] = {
    "transformers": frozenset({"deepseek_v3", "deepseek_v32", "glm4_moe", "nemotron_h", "minimax_m2"}),
    "vllm": frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe", "nemotron_h", "minimax_m2"}),
    "sglang": frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe", "nemotron_h", "minimax_m2"})}


def correction_bias_element_bytes(spec: ModelSpec, engine: str | None, load_bytes: int) -> int:
    """Bytes per element of the score-correction bias ``engine`` builds for ``spec``: fp32 (4), or the load dtype's
    ``load_bytes`` where the model class builds it in that dtype (``CORRECTION_BIAS_IN_LOAD_DTYPE``)."""
    return load_bytes if (engine, spec.model_type) in CORRECTION_BIAS_IN_LOAD_DTYPE else CORRECTION_BIAS_BYTES


def correction_bias_bytes(spec: ModelSpec, engine: str | None, load_bytes: int = OTHER_BYTES_DEFAULT) -> int:
    """Bytes of the router's score-correction bias ``engine`` allocates in each MoE layer of ``spec`` (0: none; the
    sources above): transformers by the model class alone (the buffer is built whatever the routing), vLLM and SGLang
    where the config routes with it (``MoESpec.score_correction_bias``). DeepSeek-V3 (256 routed experts, 58 MoE
    layers): 4 x 256 = 1,024 B a layer, 59,392 B a model; GLM-4.5 (160 experts, 89 MoE layers): 56,960 B."""
    moe = spec.moe
    if moe is None or spec.model_type not in _CORRECTION_BIAS_TYPES.get(engine or "", frozenset()):
        return 0
    if engine != "transformers" and not moe.score_correction_bias:
        return 0
    return correction_bias_element_bytes(spec, engine, load_bytes) * moe.num_experts


# vLLM's GateLinear with ``force_fp32_compute`` (vllm 0.19.1 layers/fused_moe/router/gate_linear.py:45-55):
# ``is_hopper_or_blackwell = current_platform.is_device_capability((9, 0)) or
# current_platform.is_device_capability_family(100)`` (compute capability 9.0 exactly, or any 10.x: platforms/
# interface.py:337-349 compares major x 10 // 10); ``can_use_specialized_kernels = current_platform.is_cuda() and
# is_hopper_or_blackwell and not bias``; ``if force_fp32_compute and not can_use_specialized_kernels: params_dtype =
# torch.float32``. Nemotron-H's router is that gate (models/nemotron_h.py:151-157, bias False): fp32 on an A100
# (8.0), an L40S (8.9), an RTX 5090 (12.0), a GPU without CUDA (ROCm) or a CPU; the model dtype on an H100/H200
# (9.0) or a B200/GB200/B300 (10.x).
VLLM_FP32_GATE: dict[str, str] = {"nemotron_h": "ffn_gate_inp"}  # model_type -> the router role of that gate
VLLM_ROUTER_KERNEL_CAPABILITY, VLLM_ROUTER_KERNEL_FAMILY = 90, 10  # SM 9.0 exactly, SM 10.x


def vllm_gate_fp32(capability: int | None) -> bool | None:
    """Whether vLLM stores a ``force_fp32_compute`` gate in fp32 on a device of CUDA compute ``capability`` (major
    x 10 + minor; 0: a device vLLM runs without CUDA): True without its specialized router kernels (not SM 9.0 or
    10.x), False with them; None when the capability is not known.

    >>> vllm_gate_fp32(80), vllm_gate_fp32(90), vllm_gate_fp32(103), vllm_gate_fp32(120), vllm_gate_fp32(0)
    (True, False, False, True, True)
    """
    if capability is None:
        return None
    return not (capability == VLLM_ROUTER_KERNEL_CAPABILITY or capability // 10 == VLLM_ROUTER_KERNEL_FAMILY)


def engine_tensor_bytes(engine: str | None, model_type: str, capability: int | None = None) -> dict[str, int | None]:
    """The roles ``engine`` builds in a dtype of its own for ``model_type`` (``ENGINE_TENSOR_BYTES`` and
    ``ENGINE_MODEL_TENSOR_BYTES``): role -> bytes per element (None: the compute dtype); ``capability``: the device's
    CUDA compute capability (0: no CUDA; None: unknown), for vLLM's device rule (``vllm_gate_fp32``: its fp32 gate
    where the device has no specialized router kernels; unknown, the model dtype as on Hopper)."""
    own = ENGINE_TENSOR_BYTES.get(engine or "", {})
    extra = ENGINE_MODEL_TENSOR_BYTES.get((engine or "", model_type))
    if engine == "vllm" and model_type in VLLM_FP32_GATE and vllm_gate_fp32(capability):
        extra = {**(extra or {}), VLLM_FP32_GATE[model_type]: 4}
    return {**own, **extra} if extra else own
_STORAGE_LABEL = {2: "bf16/fp16", 4: "fp32"}


def tensor_bytes(spec: ModelSpec, fmt: str, t: Tensor, group_size: int = GROUP_SIZE_DEFAULT,
                 other_bytes: int = OTHER_BYTES_DEFAULT, fused_experts: bool = False,
                 engine: str | None = None, capability: int | None = None) -> tuple[int, str]:
    """(bytes, storage label) of tensor group ``t`` of ``spec`` in the normalized format ``fmt`` (a GGUF type by
    llama-quant.cpp's rules, else the module table's); the one per-tensor rule ``weight_bytes`` sums. ``engine``:
    the serving engine that builds it, whose own dtype for the role (``engine_tensor_bytes``, on a device of CUDA
    compute ``capability``) wins."""
    if fmt.startswith("gguf:"):
        gtype = gguf_tensor_type(spec, fmt[5:], t)
        return ggml_tensor_bytes(gtype, t.numel // t.count) * t.count, gtype
    own = engine_tensor_bytes(engine, spec.model_type, capability)
    if t.role in own:
        per = own[t.role] or other_bytes
        return t.numel * per, _STORAGE_LABEL.get(per, "other")
    if fmt == "nvfp4" and nvfp4_kept(spec, t):  # an exclude_modules layer: UnquantizedLinearMethod, model dtype
        return t.numel * other_bytes, _STORAGE_LABEL.get(other_bytes, "other")
    if fmt == CT_METHOD:
        return _ct_tensor_bytes(spec, t, other_bytes)
    return _tensor_bytes_simple(fmt, t, group_size, other_bytes, fused_experts)


def spec_ct_config(spec: ModelSpec) -> CTConfig:
    """The checkpoint's compressed-tensors config, which format ``compressed-tensors`` is sized from; one-line
    InputError for a model whose quantization_config is not one."""
    cfg = ct_config(spec.name, spec.quantization_config)
    if cfg is None:
        raise InputError(f"{spec.name}: weight format {CT_METHOD} is sized from the checkpoint's own quantization_config "
                         f"(quant_method {CT_METHOD!r}), which this model has not; name another format")
    return cfg


def _ct_tensor_bytes(spec: ModelSpec, t: Tensor, other_bytes: int) -> tuple[int, str]:
    """(bytes, label) of tensor group ``t`` of a compressed-tensors checkpoint: by the config group that quantizes it
    (formulas/compressed_tensors.py), else in the compute dtype ``other_bytes``. The scales are in the checkpoint's
    dtype (``dtype_format``), the one its weights were quantized from."""
    scheme = ct_scheme_of(spec, spec_ct_config(spec), t)
    if scheme is None:
        return t.numel * other_bytes, _STORAGE_LABEL.get(other_bytes, "other")
    scale = DTYPE_BYTES[dtype_format(spec)[0]]
    return ct_matrix_bytes(scheme, t.shape[0], t.shape[1], scale) * t.count, scheme.label


@lru_cache(maxsize=64)
def ct_layer_classes(spec: ModelSpec) -> tuple[frozenset[str], ...]:
    """Per decoder layer of a compressed-tensors ``spec``, the (role, config group) pairs its quantizable matrices
    take, so ``weight_bytes`` sums layers whose ignore / target patterns differ apart (a ``re:model\\.layers\\.0\\.``
    entry)."""
    cfg = spec_ct_config(spec)
    out: list[set[str]] = [set() for _ in range(spec.num_layers)]
    for t in model_tensors(spec):
        if 0 <= t.layer < spec.num_layers and t.matrix:
            s = ct_scheme_of(spec, cfg, t)
            out[t.layer].add(f"{t.role}={s.group if s else ''}")
    return tuple(frozenset(s) for s in out)


def nvfp4_kept(spec: ModelSpec, t: Tensor) -> bool:
    """Whether the ModelOpt NVFP4 config of ``spec`` keeps tensor ``t`` in the compute dtype: a decoder-layer
    linear its exclude_modules / ignore list matches as vLLM matches it (formulas/modelopt_exclusions.py
    ``excluded_roles``). The other matrices are stored by eq. N1."""
    kept = excluded_roles(spec)
    return bool(kept) and 0 <= t.layer < len(kept) and t.role in kept[t.layer]


_LAYER_DEPENDENT = frozenset({"attn_v", "attn_kv_b", "ffn_down", "ffn_exps_down", "ffn_shexp_down"})


def _use_more_bits(i: int, n: int) -> bool:
    # llama-quant.cpp: first and last eighth of the layers, and every third layer in between
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _layer_class(i: int, n: int) -> tuple[bool, ...]:
    """Every layer predicate ``gguf_tensor_type`` applies (keep the two in step): layers with the same class get
    the same type, so ``weight_bytes`` resolves each class once instead of each layer."""
    return (i < 2, i < 4, i < n // 16, i < n // 8, _use_more_bits(i, n))


def _layer_classes(n: int) -> list[tuple[bool, ...]]:
    """:func:`_layer_class` of layers 0..n-1 (its predicates written out: one call per layer, not two)."""
    a, b = n // 16, n // 8
    return [(i < 2, i < 4, i < a, i < b, _use_more_bits(i, n)) for i in range(n)]


def _ships_mxfp4_experts(spec: ModelSpec) -> bool:
    """The checkpoint stores its routed experts in MXFP4 (quantization_config quant_method mxfp4: gpt-oss)."""
    return str(spec.quantization_config.get("quant_method", "")).lower() == "mxfp4"


# families whose GGUF keeps the checkpoint's fused query-key-value projection as one blk.N.attn_qkv tensor (llama.cpp
# as vendored in llama-cpp-python 0.3.36: gguf-py/gguf/tensor_mapping.py L232-252 MODEL_TENSOR.ATTN_QKV, and their
# converters in conversion/*.py (phi.py Phi3MiniModel, gptneox.py, falcon.py, bloom.py, gpt2.py, mpt.py, dbrx.py,
# starcoder.py) write it without splitting it into attn_q/attn_k/attn_v)
GGUF_FUSED_QKV = frozenset({"phi3", "gpt_neox", "falcon", "bloom", "gpt2", "mpt", "dbrx", "gpt_bigcode"})


def gguf_tensor_type(spec: ModelSpec, ftype: str, t: Tensor) -> str:
    """The GGML type llama.cpp's quantizer gives tensor ``t`` for file type ``ftype`` (llama-quant.cpp)."""
    base = GGUF_FTYPES[ftype]
    if t.component == "experts" and t.matrix and _ships_mxfp4_experts(spec):
        # a checkpoint that ships its experts in MXFP4 (gpt-oss) keeps them MXFP4 in every GGUF: the converter
        # repacks the MXFP4 blocks as raw GGML MXFP4 whatever --outtype says (llama.cpp as vendored in
        # llama-cpp-python 0.3.36: conversion/gpt_oss.py L19-22 dequant_model skips MXFP4, L49-62 repack_mxfp4
        # add_tensor(raw_dtype=MXFP4)), and llama-quantize refuses to requantize an already quantized tensor
        # (src/llama-quant.cpp L1306-1307 "requantizing from type %s is disabled"), so published K-quants keep
        # them (bartowski's gpt-oss-20b card: "All quants keep the feed forward networks at mxfp4")
        return "MXFP4"
    if len(t.shape) != 2 or t.role in ("ffn_gate_inp", "position_embd") or t.component == "vision":
        # 1-D tensors, the router and the SSM conv kernel stay F32 (llama-quant.cpp: only >= 2-D weights are
        # quantized, "ssm_conv1d.weight" excluded by name); Jamba's 2-D A [d_inner, d_state] goes through the
        # shape fallback below (16 columns: no quant block fits -> F16)
        return "F32" if len(t.shape) != 2 or t.role == "ffn_gate_inp" else "F16"
    if base in ("F32", "F16", "BF16"):
        return base
    n = spec.num_layers
    n_expert = spec.moe.num_experts if spec.moe else 1
    n_gqa = spec.num_heads // spec.num_kv_heads
    role, i = t.role, t.layer
    if role in ("attn_q", "attn_k", "attn_v") and spec.model_type in GGUF_FUSED_QKV:
        role = "attn_qkv"  # one fused tensor in the file: one type for its q, k and v rows (rows share ncols = h)
    new = base
    is_output = role == "output" or (role == "token_embd" and spec.tie_word_embeddings)
    if is_output:
        nx = t.shape[1]
        if ftype == "mxfp4_moe" or nx % ggml_types()[base]["block"] != 0:
            new = "Q8_0"
        elif ftype in ("iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq2_s", "iq2_m", "iq1_m"):
            new = "Q5_K"
        elif new != "Q8_0":
            new = "Q6_K"
        return new
    if ftype == "mxfp4_moe":
        new = "MXFP4" if t.component == "experts" else "Q8_0"
    elif role == "token_embd":
        pass
    elif role == "attn_qkv":
        # llama-quant.cpp's rule for the fused tensor (vendored 0.3.36 L689-695, "category ==
        # tensor_category::ATTENTION_QKV"; the same rule as name.find("attn_qkv.weight") in the releases the published
        # files were made with): Q3_K_M/Q3_K_L/IQ3_M -> Q4_K, Q4_K_M -> Q5_K, Q5_K_M -> Q6_K on every layer, and no
        # attn_v use_more_bits or 8-expert rule. In 0.3.36 itself ``category_is_attn_v`` (L157-160) also takes
        # ATTENTION_QKV, so its attn_v branch (L567) runs first and shadows this one: a file quantized with that build
        # gives the fused tensor attn_v's types. The published files follow this rule (bartowski phi-4-GGUF, llama.cpp
        # b4456: Q4_K_M 9.05 GB, Q5_K_M 10.60 GB; tests/formulas/test_weight_formats.py), so it is the one modelled.
        if ftype in ("q3_k_m", "q3_k_l", "iq3_m"):
            new = "Q4_K"
        elif ftype == "q4_k_m":
            new = "Q5_K"
        elif ftype == "q5_k_m":
            new = "Q6_K"
    elif role in ("attn_v", "attn_kv_b"):
        if ftype == "q2_k":
            new = "Q4_K" if n_gqa >= 4 else "Q3_K"
        elif ftype == "q2_k_s" and n_gqa >= 4:
            new = "Q4_K"
        elif ftype == "iq3_m":
            new = "Q4_K"
        elif ftype == "q3_k_m":
            new = "Q5_K" if i < 2 else "Q4_K"
        elif ftype == "q3_k_l":
            new = "Q5_K"
        elif ftype in ("iq4_nl", "iq4_xs") and n_gqa >= 4:
            new = "Q5_K"
        elif ftype in ("q4_k_m", "q5_k_m") and _use_more_bits(i, n):
            new = "Q6_K"
        elif ftype == "q4_k_s" and i < 4:
            new = "Q5_K"
        if n == 80 and n_gqa > 1 and new in ("Q3_K", "Q4_K"):
            new = "Q5_K"  # llama.cpp LLM_TYPE_70B bump for 80-layer GQA models
        if n_expert == 8:
            new = "Q8_0"
    elif role == "attn_k":
        if n_expert == 8:
            new = "Q8_0"
    elif role.startswith("ffn") and role.endswith("_down"):
        if ftype == "q2_k":
            new = "Q3_K"
        elif ftype == "q2_k_s" and i < n // 8:
            new = "Q4_K"
        elif ftype == "q3_k_m":
            new = "Q5_K" if i < n // 16 else "Q4_K"
        elif ftype == "iq3_m" and (i < n // 8 or (n_expert == 8 and _use_more_bits(i, n))):
            new = "Q4_K"
        elif ftype == "q3_k_l":
            new = "Q5_K"
        elif ftype == "q4_k_m":
            if _use_more_bits(i, n):
                new = "Q6_K"
        elif i < n // 8 and ftype in ("iq4_nl", "iq4_xs"):
            new = "Q5_K"
        elif ftype == "q5_k_m" and _use_more_bits(i, n):
            new = "Q6_K"
        elif ftype == "q4_k_s" and i < n // 8:
            new = "Q5_K"
    elif role == "attn_output":
        if n_expert == 8:
            if ftype in ("q2_k", "q3_k_s", "q3_k_m", "iq4_nl", "q4_k_s", "q4_k_m", "iq3_s", "iq3_m", "iq4_xs"):
                new = "Q5_K"
        elif ftype == "q2_k":
            new = "Q3_K"
        elif ftype == "q3_k_m" or ftype == "iq3_m":
            new = "Q4_K"
        elif ftype == "q3_k_l":
            new = "Q5_K"
    # shape fallback (tensor_type_fallback): rows not divisible by the block size
    ncols = t.shape[1]
    if ncols % ggml_types()[new]["block"] != 0:
        new = {"IQ4_XS": "IQ4_NL", "IQ3_S": "IQ4_NL", "IQ3_XXS": "IQ4_NL", "IQ2_S": "IQ4_NL", "IQ2_XXS": "IQ4_NL",
               "Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}.get(new, new)
        if ncols % ggml_types()[new]["block"] != 0:
            new = "F16"
    return new


@lru_cache(maxsize=512)
def weight_bytes(spec: ModelSpec, fmt: str, group_size: int = GROUP_SIZE_DEFAULT,
                 other_bytes: int = OTHER_BYTES_DEFAULT, fused_experts: bool = False,
                 engine: str | None = None, capability: int | None = None) -> WeightBytes:
    """Weight memory of ``spec`` stored in format ``fmt`` (see the module table for each rule).

    ``other_bytes`` is the element size of the tensors a quantized format leaves unquantized (embeddings,
    lm_head, norms, router): 2 when loaded in bf16/fp16, 4 when loaded without a torch_dtype (fp32).
    ``fused_experts``: bitsandbytes formats leave routed experts and router unquantized (``bnb_quantizes``).
    ``engine``: the serving engine, whose own dtype for some roles wins (``ENGINE_TENSOR_BYTES``); ``capability``:
    the device's CUDA compute capability where that dtype depends on it (``engine_tensor_bytes``; None: unknown).
    ``fmt`` "file": the bytes stored in the model file the spec was read from (``file_weight_bytes``).
    """
    if fmt == "file":
        return file_weight_bytes(spec)
    fmt = normalize_format(fmt)
    if group_size <= 0:
        raise InputError(f"group_size must be positive, got {group_size}")
    by_comp: dict[str, int] = {}
    by_store: dict[str, int] = {}
    n_layers = spec.num_layers
    layers = [0] * n_layers
    experts = [0] * n_layers
    matrices = [0] * n_layers
    memo: dict[tuple[object, ...], tuple[int, str]] = {}
    gguf = fmt.startswith("gguf:")
    layer_dependent = _LAYER_DEPENDENT if gguf else frozenset()
    # a layer's class: GGUF's llama-quant.cpp predicates, or the roles a ModelOpt NVFP4 exclude_modules list keeps
    # 16-bit in it (nvfp4_kept); None: every layer of a kind stores alike
    classes: list[tuple[bool, ...]] | tuple[frozenset[str], ...] | None = None
    if gguf:
        classes = _layer_classes(n_layers)
    elif fmt == "nvfp4" and (kept := excluded_roles(spec)):
        classes = kept
        layer_dependent = frozenset().union(*kept)
    elif fmt == CT_METHOD:
        classes = ct_layer_classes(spec)
        layer_dependent = frozenset(p.split("=")[0] for c in classes for p in c)
    head, groups, tail = layer_groups(spec)

    def one(t: Tensor, cls: tuple[bool, ...] | frozenset[str] | None = None) -> tuple[int, str]:
        """(bytes, storage label) of ``t``; ``cls``: its layer's class (for the roles whose storage depends on the
        layer: GGUF's llama-quant.cpp use_more_bits / i_layer rules, _layer_class; NVFP4's exclude_modules)."""
        role, comp, shape, count, layer, numel = t  # Tensor is a tuple: unpacking is the fast path
        key = (role, shape, count, comp, cls if role in layer_dependent else None)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = tensor_bytes(spec, fmt, t, group_size, other_bytes, fused_experts, engine, capability)
        return hit

    def add(comp: str, label: str, b: int) -> None:
        by_comp[comp] = by_comp.get(comp, 0) + b
        by_store[label] = by_store.get(label, 0) + b

    for t in head:
        b, label = one(t)
        add(t[1], label, b)
    # a decoder layer's bytes depend on it only through its kind (tensors.layer_groups) and, for GGUF, the layer
    # predicates of llama-quant.cpp (_layer_class): each (kind, class) is summed once, as its first layer holds
    # it, and counted once per layer; the (kind, class) pairs in the order their first layers come, so every
    # key enters by_comp and by_store in the order a layer-by-layer sum gives it (integers: the same totals)
    runs: dict[tuple[int, tuple[bool, ...] | frozenset[str] | None], list[int]] = {}
    if classes is not None:
        group_of = [0] * n_layers
        for g, (_, _, members) in enumerate(groups):
            for i in members:
                group_of[i] = g
        for i in range(n_layers):
            runs.setdefault((group_of[i], classes[i]), []).append(i)
    else:
        for g, (_, _, members) in enumerate(groups):
            runs[(g, None)] = list(members)
    # each group's tensors resolved once (at its first layer); another run of the group re-resolves only the
    # tensors whose GGUF type depends on the layer, re-stamped with the run's first layer, and is summed again only
    # when one of their types differs
    resolved: dict[int, list[tuple[int, str]]] = {}
    # per group, each tensor's component and what a layer's parts count it as: 1 routed experts, 2 another matrix
    parts = [[(t[1], 1 if t[1] == "experts" else 2 if t.matrix else 0) for t in tpl] for _, tpl, _ in groups]
    dependent = [[j for j, t in enumerate(tpl) if t[0] in layer_dependent] for _, tpl, _ in groups]
    sums: dict[tuple[object, ...], tuple[dict[str, int], dict[str, int], int, int, int]] = {}
    for (g, cls), idx in runs.items():
        tpl = groups[g][1]
        res = resolved.get(g)
        if res is None:
            res = resolved[g] = [one(t, cls) for t in tpl]
        elif cls is not None and dependent[g]:
            res = list(res)
            for j in dependent[g]:
                res[j] = one(tpl[j].at(idx[0]), cls)
        key = (g, *(res[j] for j in dependent[g]))
        agg = sums.get(key)
        if agg is None:
            comps: dict[str, int] = {}
            stores: dict[str, int] = {}
            exp = mat = 0
            # in tensor order: the keys first appear as they do tensor by tensor
            for (comp, part), (b, label) in zip(parts[g], res, strict=True):
                comps[comp] = comps.get(comp, 0) + b
                stores[label] = stores.get(label, 0) + b
                if part == 1:
                    exp += b
                elif part == 2:
                    mat += b
            agg = sums[key] = (comps, stores, sum(comps.values()), exp, mat)
        k = len(idx)
        for comp, b in agg[0].items():
            by_comp[comp] = by_comp.get(comp, 0) + b * k
        for label, b in agg[1].items():
            by_store[label] = by_store.get(label, 0) + b * k
        total, exp, mat = agg[2], agg[3], agg[4]
        for i in idx:
            layers[i], experts[i], matrices[i] = total, exp, mat
    for tensors, blocks in tail:  # a repeated segment (a vision tower's blocks) summed once, times its blocks
        if not blocks:
            for t in tensors:
                b, label = one(t)
                add(t[1], label, b)
            continue
        comps = {}
        stores = {}
        for t in tensors:  # in tensor order: keys first appear as tensor by tensor
            b, label = one(t)
            comps[t[1]] = comps.get(t[1], 0) + b
            stores[label] = stores.get(label, 0) + b
        for comp, b in comps.items():
            by_comp[comp] = by_comp.get(comp, 0) + b * len(blocks)
        for label, b in stores.items():
            by_store[label] = by_store.get(label, 0) + b * len(blocks)
    bias = correction_bias_bytes(spec, engine, other_bytes)  # beside the parameters: the router's buffer per MoE layer
    if bias:
        for i, moe in enumerate(spec.moe_layers):
            if moe:
                layers[i] += bias
                add("router", _STORAGE_LABEL[correction_bias_element_bytes(spec, engine, other_bytes)], bias)
    notes: list[str] = []
    if fmt.startswith("gguf:") and spec.vision is not None:
        notes.append("GGUF keeps the vision encoder in a separate mmproj file; counted here at F16")
    return WeightBytes(fmt, sum(by_comp.values()), by_comp, by_store, tuple(notes), tuple(layers), tuple(experts),
                       tuple(matrices))


_NOT_PRODUCTS = frozenset({"embedding", "lm_head", "vision", "per_layer_embedding"})


@lru_cache(maxsize=256)
def gguf_product_weights(spec: ModelSpec, ftype: str) -> tuple[tuple[str, float], ...]:
    """The weights a prompt token multiplies in the layer stack's matrix products, by the GGML type llama.cpp's
    quantizer gives them for file type ``ftype`` (``gguf_tensor_type``): every 2-D weight but the embedding lookup,
    the lm_head (run for the last token only), the vision tower and a per-layer embedding table; routed experts at the
    share k / E a token runs (``params.routed_share``). Sorted by type."""
    if ftype not in GGUF_FTYPES:
        raise InputError(f"unknown GGUF file type {ftype!r}")
    share = routed_share(spec)
    out: dict[str, float] = {}
    for t in model_tensors(spec):
        if not t.matrix or t.component in _NOT_PRODUCTS:
            continue
        g = gguf_tensor_type(spec, ftype, t)
        out[g] = out.get(g, 0.0) + t.numel * (share if t.component == "experts" else 1.0)
    return tuple(sorted(out.items()))


def file_weight_bytes(spec: ModelSpec) -> WeightBytes:
    """Weight bytes exactly as stored in the files the spec was read from (safetensors/GGUF)."""
    fw = spec.file_weights
    if fw is None:
        raise InputError(f"{spec.name}: no weight files were read")
    layers = fw.layer_bytes or tuple([0] * spec.num_layers)
    by_comp = {"embedding": fw.embedding_bytes, "lm_head": fw.output_bytes,
               "layers_and_other": fw.total_bytes - fw.embedding_bytes - fw.output_bytes}
    n = len(layers)
    return WeightBytes("file", fw.total_bytes, {k: v for k, v in by_comp.items() if v}, dict(fw.by_dtype),
                       (f"read from {fw.path}",), layers, fw.layer_expert_bytes or tuple([0] * n),
                       fw.layer_matrix_bytes or tuple([0] * n))


# The exclude_modules / ignore entries of a ModelOpt NVFP4 config that name a module eq. N1's rule keeps 16-bit anyway
# (not a matrix of QUANT_COMPONENTS): the lm_head, the token embedding, an MoE router (``mlp.gate``,
# ``block_sparse_moe.gate``, ``mixer.gate``; dense MLPs name theirs ``gate_proj``), Qwen's 1-row
# ``shared_expert_gate``, a Mamba ``conv1d`` and a vision tower (vLLM keeps ``vision_tower`` / ``vision_model``
# unquantized whatever the list says: modelopt.py:195-201). An entry is read by its last dotted name, a trailing '*'
# dropped. Other entries (per-layer exclusions) are matched to the layers by formulas/modelopt_exclusions.py for the
# model types whose module paths it knows (MODELOPT_FAMILIES); for any other model type they are refused.
_NVFP4_KEPT_ANYWAY = re.compile(r"(^|\.)(lm_head|embed_tokens|gate|shared_expert_gate|conv1d)$"
                                r"|(^|\.)(vision_tower|vision_model|embed_vision|multi_modal_projector)(\.|$)")


# What a user can do about a quantized checkpoint whose quantization_config is refused: any --weights is sized on the
# checkpoint as published (its stored format is read first), so only the unquantized base model sizes in another one
def _base_model_hint(fmt: str) -> str:
    """The refusal's hint: size the unquantized base model in ``fmt`` (every quantizable matrix in it)."""
    return (f"To size it anyway, give the unquantized base model's config (no quantization_config) with --weights "
            f"{fmt}: every quantizable matrix in {fmt}, not this release's per-layer mix")


def modelopt_nvfp4_check(name: str, q: dict[str, Any], model_type: str | None = None) -> None:
    """Refuse (InputError, one line) a ModelOpt NVFP4 quantization config eq. N1 would not size as published:

    - the hf_quant_config.json shape (``{"quantization": {...}}``) without ``group_size``, ``kv_cache_quant_algo`` or
      ``exclude_modules``, which vLLM refuses to load (vllm 0.19.1 modelopt.py:1043-1054 ``ModelOptNvFp4Config.
      _from_config``: "NVFP4 quantization requires the following fields in hf_quant_config.json");
    - a group size other than NVFP4's 16 (``NVFP4_GROUP_SIZE``);
    - an ``exclude_modules`` (or config.json ``ignore``) entry that keeps a matrix the rule quantizes in 16-bit, on a
      ``model_type`` outside ``MODELOPT_FAMILIES`` (whose module paths formulas/modelopt_exclusions.py does not
      know): refused rather than sized low. On a family it knows, the entry is matched to layers as vLLM does
      (``nvfp4_kept``)."""
    inner = q.get("quantization")
    section = inner if isinstance(inner, dict) else q
    if isinstance(inner, dict):
        missing = [k for k in ("group_size", "kv_cache_quant_algo", "exclude_modules") if k not in inner]
        if missing:
            raise InputError(f"{name}: its NVFP4 hf_quant_config.json lacks {', '.join(missing)}, which vLLM requires "
                             "(vllm 0.19.1 modelopt.py:1043-1054); give the release's full hf_quant_config.json")
    group = section.get("group_size", NVFP4_GROUP_SIZE)
    if group is not None and int(group) != NVFP4_GROUP_SIZE:
        raise InputError(f"{name}: NVFP4 group_size {group} is not NVFP4's {NVFP4_GROUP_SIZE}: not supported")
    if model_type in MODELOPT_FAMILIES:
        return
    for entry in modelopt_exclude_list(q):
        if not _NVFP4_KEPT_ANYWAY.search(entry.rstrip("*").rstrip(".")):
            raise InputError(f"{name}: NVFP4 exclude_modules entry {entry!r} keeps a quantizable layer 16-bit; "
                             f"per-layer exclusions are modelled for {', '.join(sorted(MODELOPT_FAMILIES))} only. "
                             f"{_base_model_hint('nvfp4')}")


def stored_format(spec: ModelSpec) -> tuple[str, int, str]:
    """The format a checkpoint is published in, from its quantization_config / torch_dtype.

    Returns (format, group_size, explanation).
    """
    q = spec.quantization_config
    method = str(q.get("quant_method", "")).lower()
    algo = modelopt_quant_algo(q)
    if algo == "FP8":  # vLLM ModelOptFp8Config: per-tensor PerTensorScaleParameter weight scales, as our fp8
        return "fp8", GROUP_SIZE_DEFAULT, "quantization_config ModelOpt quant_algo FP8 (per-tensor scales)"
    if algo == "NVFP4":
        modelopt_nvfp4_check(spec.name, q, spec.model_type)
        if vision_quantized(spec):
            raise quantized_vision_refusal(spec.name, "its NVFP4 exclude_modules leaves the vision tower "
                                           "(model.visual) quantized in NVFP4", "'model.visual*' in exclude_modules")
        kept = sum(len(k) for k in excluded_roles(spec))  # raises where vLLM does (a fused layer half listed)
        return "nvfp4", NVFP4_GROUP_SIZE, ("quantization_config ModelOpt quant_algo NVFP4 (group 16 fp8 scales; "
                                           + (f"exclude_modules keeps {kept} layer matrices 16-bit, matched as vLLM "
                                              "matches them" if kept else "exclude_modules all kept 16-bit by the "
                                              "format's rule") + ")")
    if algo == "MIXED_PRECISION":  # a per-module format map, as nvidia's Qwen3.6 NVFP4 releases write
        raise InputError(f"{spec.name}: ModelOpt quant_algo MIXED_PRECISION (a per-layer format map in "
                         "quantized_layers) is not supported: only one ModelOpt format throughout (FP8 or NVFP4, with "
                         f"exclude_modules) is sized. {_base_model_hint('nvfp4')}")
    if algo is not None:
        raise InputError(f"{spec.name}: ModelOpt quant_algo {algo!r} is not supported (ModelOpt FP8 and NVFP4 only)")
    if method == "fp8":
        if q.get("weight_block_size"):
            return "fp8-block", GROUP_SIZE_DEFAULT, f"quantization_config fp8 with weight_block_size {q['weight_block_size']}"
        return "fp8", GROUP_SIZE_DEFAULT, "quantization_config fp8 (per-tensor scales)"
    if method in ("gptq", "awq"):
        bits = int(q.get("bits", q.get("w_bit", 4)))
        gs = int(q.get("group_size", q.get("q_group_size", GROUP_SIZE_DEFAULT)) or GROUP_SIZE_DEFAULT)
        if gs < 0:
            gs = 1 << 30  # group_size -1 = one group per column
        name = f"{method}-int{bits}"
        if name not in FORMAT_BITS_HINT:
            raise InputError(f"{spec.name}: {method} with {bits} bits is not supported (int4/int8 only)")
        return name, gs, f"quantization_config {method} bits={bits} group_size={q.get('group_size')}"
    if method == "bitsandbytes":
        if q.get("load_in_4bit"):
            kind = str(q.get("bnb_4bit_quant_type", "fp4"))
            dq = "-dq" if q.get("bnb_4bit_use_double_quant") else ""
            return f"{kind}{dq}", GROUP_SIZE_DEFAULT, f"quantization_config bitsandbytes 4-bit {kind}{dq}"
        return "llm.int8", GROUP_SIZE_DEFAULT, "quantization_config bitsandbytes 8-bit"
    if method == "mxfp4":
        return "mxfp4", GROUP_SIZE_DEFAULT, "quantization_config mxfp4 (experts), rest bf16"
    if method == CT_METHOD:
        cfg = spec_ct_config(spec)
        groups = "; ".join(f"{s.group}: {s.format} {s.type}{s.num_bits} {s.strategy}"
                           + (f" {s.group_size}" if s.strategy in ("group", "tensor_group") else "")
                           + (f" {s.block[0]}x{s.block[1]}" if s.block else "") for s in cfg.schemes)
        size = next((s.group_size for s in cfg.schemes if s.group_size and s.group_size > 0), GROUP_SIZE_DEFAULT)
        return CT_METHOD, size, (f"quantization_config compressed-tensors ({groups}; ignore "
                                 f"{', '.join(cfg.ignore) or 'none'})")
    if method:
        raise InputError(f"{spec.name}: quantization method {method!r} is not supported")
    fmt, why = dtype_format(spec)
    return fmt, GROUP_SIZE_DEFAULT, why


def dtype_format(spec: ModelSpec) -> tuple[str, str]:
    """(format, explanation) of the checkpoint's unquantized dtype: its config's ``torch_dtype`` (fp32, fp16 or bf16;
    bf16 when absent or another dtype). For a quantized checkpoint this is the dtype of its unquantized tensors and
    compute (an AWQ checkpoint's float16)."""
    dtype = str(spec.torch_dtype or "bfloat16").lower()
    known = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
    if spec.torch_dtype and dtype not in known:  # said, so the assumption does not read as if it were bf16
        return "bf16", f"torch_dtype {spec.torch_dtype!r} is not float32, float16 or bfloat16: bf16 assumed"
    return known.get(dtype, "bf16"), f"torch_dtype {spec.torch_dtype or 'absent (bf16 assumed)'}"
