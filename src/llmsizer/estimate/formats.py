"""Which weight format an engine runs: the one rule for ``infer``, ``fit``, ``recommend`` and ``plan``.

- A model file (folder with safetensors, or .gguf) is sized from its exact tensor bytes; llama.cpp needs a .gguf.
- No format given: the checkpoint's stored format (``formulas.weight_formats.stored_format``). llama.cpp runs
  GGUF files, so an unquantized checkpoint is taken as the GGUF file llama.cpp's converter writes from it at the
  same precision (convert_hf_to_gguf.py ``--outtype`` f32 / f16 / bf16), and an MXFP4 checkpoint (gpt-oss) as
  ``gguf:mxfp4_moe`` (llama.cpp's MXFP4_MOE file type keeps the experts in MXFP4, src/llama-quant.cpp). Other
  quantized checkpoints (GPTQ, AWQ, FP8, bitsandbytes) have no GGUF counterpart: llama.cpp's default is then the
  ladder's own start (``gguf_stand_in``): the highest-quality GGUF quant no larger than the checkpoint, stated as a
  default, so ``fit``/``infer`` answer with the format ``models --fits-on`` and ``recommend`` try first. A format
  named that llama.cpp cannot run (``--weights fp8-block``) is still refused.
- Speed of a model file: its bytes are exact, but the kernels that run it follow its dominant stored type
  (``file_kernel_format``): a GGUF file's largest tensor type by bytes, a safetensors folder's stored format.
- The formats ``recommend`` and ``models --fits-on`` try, best first (``format_ladder``): the default above first
  (what ``fit`` and ``infer`` answer with no format given), then the engine's rungs (vLLM bf16 -> fp8 -> AWQ int4;
  llama.cpp F16 -> Q8_0 -> ... -> Q2_K) only where they are smaller than it, so a checkpoint that ships quantized
  (MXFP4, FP8, GPTQ/AWQ) never climbs to a larger format unless the user names one. Where the engine has no
  counterpart of the shipped format (an FP8 or GPTQ checkpoint on llama.cpp) the rungs start at the first one no
  larger than the shipped checkpoint. A .gguf file on an engine that keeps GGUF tensors starts at itself ("file":
  its per-tensor types and exact bytes, what ``fit`` answers), then the rungs smaller than its bytes.
- GGUF formats on vLLM and SGLang: both load a GGUF checkpoint and keep its tensors quantized (their GGUF
  quantization method, ``VLLM_GGUF_TYPES``), so the weights count the GGUF bytes (the formula llama.cpp's are sized
  with); a GGUF type their kernels lack is refused (``engine_refuses``). On transformers GGUF is dequantized on load
  (transformers docs "GGUF and interaction with Transformers"): the weights count in bf16, with a warning; a .gguf
  file given to transformers too (its bytes are not the ones it holds), so its speed runs transformers' bf16 step,
  not llama.cpp's kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from ..catalog.hardware import Device
from ..errors import FieldError, InputError
from ..formulas.compressed_tensors import CT_METHOD
from ..formulas.nf4_quantization import fused_experts_kept
from ..formulas.params import count_params
from ..formulas.vllm_mxfp4 import vllm_mxfp4_resident_extra
from ..formulas.weight_formats import (
    GGUF_FTYPES,
    GROUP_SIZE_DEFAULT,
    OTHER_BYTES_DEFAULT,
    WeightBytes,
    dtype_format,
    format_alias,
    normalize_format,
    stored_format,
    weight_bytes,
)
from ..result import Assumption
from ..specs import ModelSpec
from .model_warnings import serving_formats

GGUF_FROM_STORED = {"fp32": "gguf:f32", "fp16": "gguf:f16", "bf16": "gguf:bf16", "mxfp4": "gguf:mxfp4_moe"}
GROUPED = ("gptq-int4", "gptq-int8", "awq-int4")
VLLM_LADDER = ("bf16", "fp8", "awq-int4")
GGUF_LADDER = ("gguf:f16", "gguf:q8_0", "gguf:q6_k", "gguf:q5_k_m", "gguf:q4_k_m", "gguf:q3_k_m", "gguf:q2_k")


# vLLM refuses to load a quantization method on a GPU below the method's minimum compute capability: the gate in
# vllm/config/vllm.py (v0.30.0 L831-841: "The quantization method {m} is not supported for the current GPU. Minimum
# capability: {n}. Current capability: {c}.") over QuantizationConfig.get_min_capability(): AWQConfig 75
# (quantization/awq.py, "The AWQ kernel only supports Turing or newer GPUs"), Fp8Config 75 (quantization/fp8.py
# L147-149; FP8-block is the same config with weight_block_size), Mxfp4Config 80 (quantization/mxfp4.py). The
# vLLM issues vllm#1488 and vllm#4202 show the refusal on a V100 (capability 70).
# ModelOpt NVFP4: ModelOptNvFp4Config.get_min_capability 75 (vllm 0.19.1 PyPI wheel,
# model_executor/layers/quantization/modelopt.py:1012-1014).
# compressed-tensors: CompressedTensorsConfig.get_min_capability 70 (vllm 0.19.1 PyPI wheel, sha256 71a87f46...,
# quantization/compressed_tensors/compressed_tensors.py:116-117), and each layer's scheme is checked against its own
# (:758 ``_check_scheme_supported``): every scheme formulas/compressed_tensors.py sizes asks 75 -- WNA16
# (schemes/compressed_tensors_wNa16.py:79-81, "Turing and up"), W8A8 int8 (compressed_tensors_w8a8_int8.py:35-37),
# W8A16 FP8 (compressed_tensors_w8a16_fp8.py:49-51), W4A4 / W4A16 NVFP4 (compressed_tensors_w4a4_nvfp4.py:31-32,
# compressed_tensors_w4a16_nvfp4.py:29-31); W8A8 FP8 asks 89 but falls back to W8A16 FP8 below it (:629-646).
VLLM_MIN_CAPABILITY = {"awq-int4": 75, "fp8": 75, "fp8-block": 75, "mxfp4": 80, "nvfp4": 75, CT_METHOD: 75}
# SGLang has the same gate (python/sglang/srt/model_loader/loader.py ``_get_quantization_config`` @ 4632493: "The
# quantization method {q} is not supported for the current GPU. Minimum capability: ..." when the capability is below
# ``quant_config.get_min_capability()``), and its AWQConfig asks for Turing: ``get_min_capability`` returns 75 ("The
# AWQ kernel only supports Turing or newer GPUs", python/sglang/srt/layers/quantization/awq.py @ 0149944).
# SGLang 0.5.23's ModelOptFp4Config (NVFP4) asks for Ampere: ``get_min_capability`` returns 80 (PyPI wheel,
# sglang/srt/layers/quantization/modelopt_quant.py:1548-1550).
SGLANG_MIN_CAPABILITY = {"awq-int4": 75, "nvfp4": 80}
_MIN_CAPABILITY = {"vllm": ("vLLM", VLLM_MIN_CAPABILITY), "sglang": ("SGLang", SGLANG_MIN_CAPABILITY)}
# The device's compute capability is Device.capability (catalog/hardware.py: the row's sourced compute_capability,
# else ARCHITECTURE_CAPABILITY of its architecture), the one home of that reading.


# vLLM loads a .gguf with GGUFModelLoader (vllm/model_executor/model_loader/gguf_loader.py: "Model loader that can
# load GGUF files ... quantized with GGUF"; weight_utils.gguf_quant_weights_iterator yields each tensor's raw blocks
# with its weight type) and runs it through its GGUF quantization method, which keeps each tensor in its GGML type
# (GGUFLinearMethod stores the raw blocks as ``qweight``; GGUFEmbeddingMethod and GGUFMoEMethod the same) and
# multiplies with ggml's MMVQ / MMQ kernels or dequantizes per call: vllm/model_executor/layers/quantization/gguf.py
# @ 00620f9 L75-107, the types it runs: UNQUANTIZED_TYPES (F32, F16, BF16) and DEQUANT_TYPES = STANDARD_QUANT_TYPES
# (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1) | KQUANT_TYPES (Q2_K-Q6_K) | IMATRIX_QUANT_TYPES (IQ1_M, IQ1_S, IQ2_XXS,
# IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_XS, IQ4_NL); any other type fails to load (GGUFLinearMethod.
# process_weights_after_loading: "Unsupported GGUF quantization type"). GGUFConfig.get_min_capability is 60.
# SGLang has the same loader (python/sglang/srt/model_loader/loader.py GGUFModelLoader); its GGUF method is adapted
# from vLLM's and lists the same types (Q8_1 left out, not a file type):
# python/sglang/srt/layers/quantization/gguf.py @ 0137a1e UNQUANTIZED_TYPES, STANDARD_QUANT_TYPES, KQUANT_TYPES,
# IMATRIX_QUANT_TYPES; get_min_capability 60 on CUDA. Neither lists MXFP4 (llama.cpp's MXFP4_MOE file type).
VLLM_GGUF_TYPES = frozenset({"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K",
                             "Q4_K", "Q5_K", "Q6_K", "IQ1_M", "IQ1_S", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS",
                             "IQ3_S", "IQ4_XS", "IQ4_NL"})
GGUF_ENGINES = {"vllm": ("vLLM", VLLM_GGUF_TYPES), "sglang": ("SGLang", VLLM_GGUF_TYPES - {"Q8_1"})}
GGUF_MIN_CAPABILITY = 60


def keeps_gguf(engine: str) -> bool:
    """True when ``engine`` runs GGUF weights in their GGML types (llama.cpp, vLLM, SGLang); transformers
    dequantizes them on load."""
    return engine == "llamacpp" or engine in GGUF_ENGINES


def serving_fused_experts(spec: ModelSpec, engine: str | None, fmt: str) -> bool:
    """Whether serving ``spec`` in format ``fmt`` on ``engine`` keeps its routed experts and router unquantized (the
    ``fused_experts`` flag of ``weight_bytes`` and ``largest_quantized_matrix``): a bitsandbytes format (nf4, fp4,
    their -dq, llm.int8) of an MoE model on transformers 5, whose ``replace_with_bnb_linear`` replaces only
    ``nn.Linear`` while the experts and router are fused ``nn.Parameter``s -- the rule training's QLoRA base takes
    (formulas/nf4_quantization.py ``fused_experts_kept``, quantizer "bitsandbytes": transformers' own).

    vLLM's bitsandbytes path does quantize them: ``BitsAndBytesConfig.get_quant_method`` gives a ``FusedMoE`` layer
    ``BitsAndBytesMoEMethod`` (vllm model_executor/layers/quantization/bitsandbytes.py @ 01f5395f lines 135-136,
    whose ``_create_weights_4bit`` registers packed uint8 ``w13_weight``/``w2_weight`` per expert; its 8-bit path
    raises NotImplementedError), so every other engine keeps the default (False)."""
    return engine == "transformers" and fused_experts_kept(spec, fmt, "bitsandbytes")


# vLLM's Gemma 3n and Gemma 4 build the same attention module in every layer, the KV-sharing ones too: Gemma4Attention
# .__init__ (vllm/model_executor/models/gemma4.py @001cabc1) makes ``qkv_proj = QKVParallelLinear(hidden, head_dim,
# num_heads, num_kv_heads)`` and ``k_norm = RMSNorm(head_dim)`` before it asks whether the layer is in the last
# num_kv_shared_layers (that only sets ``kv_sharing_target_layer_name``, so ``Attention`` allocates no KV cache for
# it), and ``load_weights`` maps each checkpoint k_proj / v_proj onto that qkv_proj's k / v shard; a shared layer's
# forward still runs qkv_proj and drops k and v. Gemma3nAttention (gemma3n.py @034f08e6) is the same: qkv_proj and
# k_norm unconditional, forward runs both. transformers builds no k_proj / v_proj / k_norm in those layers
# (modeling_gemma4.py L1170-1184: what ModelSpec's tensors count), so on vLLM they come on top.
VLLM_KV_SHARED_SOURCE = ("vllm model_executor/models/gemma4.py @001cabc1 Gemma4Attention.__init__ (qkv_proj with K/V "
                         "shards and k_norm in every layer; kv_sharing_target_layer_name only skips the KV cache), "
                         "load_weights (k_proj/v_proj -> qkv_proj shards); gemma3n.py @034f08e6 Gemma3nAttention")


# SGLang's Gemma 4 does the same: Gemma4Attention.__init__ (sglang python/sglang/srt/models/gemma4_causal.py
# @03826cdd9594dba59282dd0411841506ff3a26ad) builds ``qkv_proj = QKVParallelLinear(hidden, head_dim, num_heads,
# num_kv_heads)`` and ``k_norm`` in every layer, then marks the last num_kv_shared_layers ``is_kv_shared_layer`` (its
# RadixAttention reads the KV of the last earlier layer of its type, ``save_kv_cache`` off; forward drops k and v);
# Gemma4ForCausalLM.load_weights maps every layer's checkpoint k_proj / v_proj onto the qkv_proj's "k" / "v" shards
# (stacked_params_mapping, no layer skipped). So SGLang holds the k/v weights vLLM holds. Its Gemma3nAttention
# (gemma3n_causal.py @184c9526a16c05dccca448dd6737affbe4586019) also builds qkv_proj and k_norm unconditionally (its
# load_weights not read: taken to fill them as Gemma 4's does).
SGLANG_KV_SHARED_SOURCE = ("sglang python/sglang/srt/models/gemma4_causal.py @03826cdd Gemma4Attention.__init__ "
                           "(qkv_proj with K/V shards and k_norm in every layer; is_kv_shared_layer only reuses an "
                           "earlier layer's KV), Gemma4ForCausalLM.load_weights (k_proj/v_proj -> qkv_proj shards); "
                           "gemma3n_causal.py @184c9526 Gemma3nAttention")
KV_SHARED_SOURCES = {"vllm": VLLM_KV_SHARED_SOURCE, "sglang": SGLANG_KV_SHARED_SOURCE}


def serving_weight_spec(spec: ModelSpec, engine: str | None, fmt: str) -> ModelSpec:
    """The spec whose tensors ``engine`` allocates when it serves ``spec`` in ``fmt``: ``spec`` itself, except on
    vLLM and SGLang for a model with KV-sharing layers (Gemma 3n, Gemma 4), whose k/v projections and k_norm they
    build and load in those layers too (:data:`KV_SHARED_SOURCES`): the same spec with no layer marked KV-sharing, for the weight bytes only (its KV cache is still
    the sharing one's). ``fmt`` 'file' is the file's own bytes, which already hold those tensors (the checkpoint
    carries them; transformers drops them on load)."""
    if engine not in KV_SHARED_SOURCES or fmt == "file" or not any(spec.kv_shared_layers):
        return spec
    return _all_layers_own_kv(spec)


@lru_cache(maxsize=64)
def _all_layers_own_kv(spec: ModelSpec) -> ModelSpec:
    return replace(spec, kv_shared_layers=(False,) * spec.num_layers)


def kv_shared_weights_assumption(spec: ModelSpec, served: ModelSpec, engine: str) -> Assumption | None:
    """The assumption line for the parameters :func:`serving_weight_spec` added on ``engine`` (None where it added
    none): ``vllm_kv_shared_weights`` / ``sglang_kv_shared_weights``."""
    if served is spec:
        return None
    extra = count_params(served).total - count_params(spec).total
    n = sum(spec.kv_shared_layers)
    name = {"vllm": "vLLM", "sglang": "SGLang"}[engine]
    return Assumption(f"{engine}_kv_shared_weights", f"+{extra / 1e6:.1f}M params", True,
                      f"{name} builds and loads the k/v projections and k_norm of the {n} KV-sharing layers too "
                      f"(transformers does not; no KV cache for them either way): {KV_SHARED_SOURCES[engine]}")


# vLLM has no 8-bit bitsandbytes MoE: a FusedMoE layer's quant method is BitsAndBytesMoEMethod (get_quant_method,
# vllm model_executor/layers/quantization/bitsandbytes.py @ 01f5395f L135-136), whose create_weights (L442-453) calls
# _create_weights_8bit when load_in_8bit, and that raises NotImplementedError (L591-600); so an MoE model in
# llm.int8 does not load on vLLM, whatever the device.
VLLM_BNB_MOE_SOURCE = ("vllm model_executor/layers/quantization/bitsandbytes.py @ 01f5395f L591-600: "
                       "BitsAndBytesMoEMethod._create_weights_8bit raises NotImplementedError")


# SGLang's bitsandbytes method is adapted from vLLM's and has the same gap (sglang 0.5.23, its PyPI wheel,
# sglang/srt/layers/quantization/bitsandbytes.py: get_quant_method gives a FusedMoE layer BitsAndBytesMoEMethod
# (L165-166), whose create_weights calls _create_weights_8bit when load_in_8bit (L459-460), which raises
# NotImplementedError (L571-580)).
SGLANG_BNB_MOE_SOURCE = ("sglang 0.5.23 srt/layers/quantization/bitsandbytes.py L571-580: "
                         "BitsAndBytesMoEMethod._create_weights_8bit raises NotImplementedError")
# the engines that do not load an MoE model in llm.int8: (name, where their code says so)
BNB_MOE_8BIT_GAP = {"vllm": ("vLLM", VLLM_BNB_MOE_SOURCE), "sglang": ("SGLang", SGLANG_BNB_MOE_SOURCE)}


def bnb_moe_refused(engine: str, fmt: str, spec: ModelSpec | None) -> str | None:
    """Why ``engine`` will not load ``spec`` in ``fmt``: vLLM or SGLang and an MoE model in llm.int8 (their
    bitsandbytes MoE method has no 8-bit path, ``BNB_MOE_8BIT_GAP``); None otherwise. Asked through
    ``engine_refuses`` and, with no device, ``engine_weights``."""
    if engine not in BNB_MOE_8BIT_GAP or fmt != "llm.int8" or spec is None or spec.moe is None:
        return None
    return (f"{BNB_MOE_8BIT_GAP[engine][0]} does not load the MoE model {spec.name} in llm.int8: its bitsandbytes "
            "MoE method has no 8-bit experts (quantization/bitsandbytes.py BitsAndBytesMoEMethod._create_weights_8bit)")


# MXFP4 is an experts-only format: vLLM's Mxfp4Config.get_quant_method (vllm/model_executor/layers/quantization/
# mxfp4.py L201-234 @ 007d5005) gives a FusedMoE layer Mxfp4MoEMethod and every LinearBase UnquantizedLinearMethod
# ("MXFP4 linear layer is not implemented"), attention none; transformers' Mxfp4HfQuantizer replaces the gpt-oss
# experts only, and llama.cpp's MXFP4_MOE file type keeps only the experts in MXFP4. The weights formula sizes it so
# (formulas/weight_formats.py: only ``experts`` matrices quantizable): on a model with no routed experts every tensor
# would stay 16-bit, the same bytes as bf16 under another name, so it is refused rather than sized.
MXFP4_EXPERTS_ONLY = ("MXFP4 quantizes only MoE experts (vLLM quantization/mxfp4.py Mxfp4Config.get_quant_method: "
                      "linear layers fall back to UnquantizedLinearMethod)")


# Pre-quantized ModelOpt NVFP4 checkpoints load on vLLM and SGLang only. transformers 5.24.0 (PyPI wheel) has no
# quantizer for quant_method "modelopt" (quantizers/auto.py AUTO_QUANTIZER_MAPPING, L77-) and its own NVFP4 quantizer
# quantizes a 16-bit checkpoint on load, refusing a pre-quantized one (quantizers/quantizer_nvfp4.py:52-54: "Loading
# pre-quantized NVFP4 checkpoints is not supported yet."); llama.cpp runs GGUF files (its refusal of a non-GGUF
# format is ``engine_weights``'s).
NVFP4_ENGINES = ("vllm", "sglang")


# transformers serves a compressed-tensors checkpoint decompressed: transformers 5.24.0 (PyPI wheel) quantizers/
# quantizer_compressed_tensors.py:40-49 (``dequantize=False``, the default, "leaves them compressed and lets
# compressed-tensors decompress them on the first forward pass"; FP8 kept only with the opt-in
# ``use_optimized_inference``), done by compressed-tensors 0.20.1 compressors/model_compressors/model_compressor.py
# ``add_decompress_hook`` :256-280 (a forward pre-hook that runs ``decompress_model`` on the first forward, :176-180):
# from the first token on, the weights are held in the checkpoint's dtype.
CT_TRANSFORMERS_SOURCE = ("transformers 5.24.0 quantizers/quantizer_compressed_tensors.py:40-49; compressed-tensors "
                          "0.20.1 model_compressor.py add_decompress_hook :256-280")


def nvfp4_refused(engine: str, fmt: str) -> str | None:
    """Why ``engine`` does not load NVFP4 weights: transformers (see :data:`NVFP4_ENGINES`); None otherwise (llama.cpp
    is refused by ``engine_weights``'s GGUF rule). Asked by ``engine_weights`` and ``engine_refuses``."""
    if fmt != "nvfp4" or engine != "transformers":
        return None
    return ("transformers does not load a pre-quantized NVFP4 checkpoint (5.24.0 quantizers/quantizer_nvfp4.py:52-54; "
            "no 'modelopt' quantizer in quantizers/auto.py): serve it with vLLM or SGLang")


# Below compute capability 10.0 (no FP4 tensor cores) both engines run NVFP4 as weight-only FP4 Marlin, the weights
# unchanged in size: vLLM 0.19.1 quantization/utils/nvfp4_utils.py:39-66 ``select_nvfp4_linear_backend``
# (FlashInfer CUTLASS at has_device_capability(100), vLLM's CUTLASS where its fp4 kernels are built for the GPU,
# else Marlin, logged at :143-149 "Your GPU does not have native support for FP4 computation ... Weight-only FP4
# compression will be used leveraging the Marlin kernel"), fused_moe/oracle/nvfp4.py ``select_nvfp4_moe_backend``
# :129- (Marlin last); SGLang 0.5.23 layers/quantization/fp4_utils.py:154-158 (auto: "marlin" for
# 8.0 <= capability < 10.0) and modelopt_quant.py:2377-2386 (MoE: Marlin fallback on 8.0-10.0).
NVFP4_NATIVE_CAPABILITY = 100


def nvfp4_kernel_note(engine: str, fmt: str, device: Device) -> str | None:
    """A warning when ``engine`` (vLLM, SGLang) runs NVFP4 weights on a GPU below compute capability 10.0: weight-only
    FP4 Marlin (:data:`NVFP4_NATIVE_CAPABILITY`); vLLM on an AMD GPU: its emulation backend; None otherwise or where
    the capability is not known."""
    from .device import gpu_runtime  # device.py imports this module: the one runtime rule, read at call time

    if fmt == "nvfp4" and engine == "vllm" and gpu_runtime(device) == "rocm":
        # vLLM on ROCm: NvFp4LinearBackend.EMULATION by default (vllm-project/vllm pull 35733, merged 2026-03:
        # "NVFP4 dense models ... on AMD Instinct MI300, MI355X ... through emulation"); the bytes are the same
        return (f"vLLM runs NVFP4 on {device.id} (ROCm) through its emulation backend (vllm pull 35733: dense "
                "linears dequantized to 16-bit for each matmul): the same weight bytes, 16-bit matmuls; its NVFP4 "
                "MoE experts on ROCm are not in that change")
    have = device.capability
    if fmt != "nvfp4" or engine not in NVFP4_ENGINES or have is None or have >= NVFP4_NATIVE_CAPABILITY:
        return None
    name = {"vllm": "vLLM", "sglang": "SGLang"}[engine]
    return (f"{name} runs NVFP4 on {device.id} (compute capability {have / 10:.1f}, no FP4 tensor cores below "
            f"{NVFP4_NATIVE_CAPABILITY / 10:.1f}) as weight-only FP4 Marlin: the same weight bytes, 16-bit matmuls")


def mxfp4_dense_refused(fmt: str, spec: ModelSpec | None) -> str | None:
    """Why weights ``fmt`` are refused for ``spec``: mxfp4 on a model with no routed experts (MXFP4_EXPERTS_ONLY),
    on every engine; None otherwise. Asked by ``engine_weights`` and ``engine_refuses``."""
    if fmt != "mxfp4" or spec is None or (spec.moe is not None and spec.moe.num_experts):
        return None
    return f"{MXFP4_EXPERTS_ONLY}; {spec.name} has no experts, so its weights would stay 16-bit"


def engine_kernel_format(engine: str | None, fmt: str) -> str:
    """The format whose kernel class (bandwidth share, per-layer overhead, KV layout, compute dtype) the speed
    estimate uses for weights ``fmt`` on ``engine``: ``fmt`` itself, except a GGUF format on vLLM or SGLang, which
    runs in that engine's step (CUDA graphs, its paged KV cache) at its own streaming rate, with 16-bit activations
    (GGUFConfig.get_supported_act_dtypes): the 16-bit format of the same width (F32 -> fp32, F16 -> fp16, else
    bf16). The bytes read stay the GGUF ones. Not a measured rate: no vLLM/SGLang GGUF row is in validation/."""
    if engine not in GGUF_ENGINES or not fmt.startswith("gguf:"):
        return fmt
    return {"gguf:f32": "fp32", "gguf:f16": "fp16"}.get(fmt, "bf16")


def gguf_type_refused(engine: str, fmt: str) -> str | None:
    """Why ``engine`` (vLLM, SGLang) will not load the GGUF format ``fmt``: its main GGML type is not one its GGUF
    method runs (``GGUF_ENGINES``); None otherwise. Asked through ``engine_refuses`` only."""
    if not fmt.startswith("gguf:") or engine not in GGUF_ENGINES:
        return None
    gname, types = GGUF_ENGINES[engine]
    ggml = GGUF_FTYPES[fmt.removeprefix("gguf:")]
    if ggml in types:
        return None
    return f"{gname} does not load GGUF type {ggml} ({fmt}): its GGUF kernels run {', '.join(sorted(types))} " \
           "(quantization/gguf.py)"


def gguf_file_refused(engine: str, spec: ModelSpec | None) -> str | None:
    """Why ``engine`` (vLLM, SGLang) will not load the .gguf file ``spec`` was read from: one of the file's own
    tensor types is not one its GGUF method runs (``GGUF_ENGINES``; the method fails on any such tensor,
    quantization/gguf.py "Unsupported GGUF quantization type"); None otherwise, or when ``spec`` is no GGUF file.
    Asked through ``engine_refuses`` only (format "file")."""
    fw = None if spec is None else spec.file_weights
    if fw is None or not fw.gguf or engine not in GGUF_ENGINES:
        return None
    gname, types = GGUF_ENGINES[engine]
    lacking = sorted(t for t, _ in fw.by_dtype if t not in types)
    if not lacking:
        return None
    return f"{gname} does not load GGUF type {', '.join(lacking)} (tensors of {fw.path}): its GGUF kernels run " \
           f"{', '.join(sorted(types))} (quantization/gguf.py)"


def gguf_file_skipped(spec: ModelSpec, engine: str, weights: str | None) -> str | None:
    """What a hardware search says when ``engine`` (vLLM, SGLang) will not load the .gguf file ``spec`` was read
    from whatever the device (``gguf_file_refused``: a tensor type its GGUF method lacks) and no format is named:
    the warning that the file's rung is skipped and which formats of the model are tried instead (a checkpoint
    other than this file); None when the file is loaded, or a format is named. One-line InputError when no smaller
    rung is left (``format_ladder``): nothing of the file can be served on that engine."""
    why = engine_refuses(engine, "file", None, spec) if weights is None else None  # the types: on any device
    if why is None or spec.file_weights is None:
        return None
    others = format_ladder(spec, engine, None, fp8=True)[1:]
    if not others:
        raise FieldError("engine", f"{why}; no format smaller than the file is left to run {spec.name} on {engine} "
                         "instead: try llama.cpp, the GGUF format's own (engine llamacpp)")
    return (f"{spec.file_weights.path} as given is skipped on {engine}: {why}; the options run {spec.name} at "
            f"{engine}'s smaller formats ({', '.join(others)}), another checkpoint than this file (llama.cpp, the "
            "GGUF format's own engine)")


def engine_refuses(engine: str, fmt: str, device: Device | None, spec: ModelSpec | None = None) -> str | None:
    """Why ``engine`` will not run weights in ``fmt`` on ``device`` (None: it runs them, or its compute capability
    is not known): vLLM or SGLang and an MoE model in llm.int8 (``bnb_moe_refused``), a GGUF type vLLM's or SGLang's GGUF
    method lacks (``GGUF_ENGINES``), and vLLM's and SGLang's
    compute-capability gates (``VLLM_MIN_CAPABILITY``, ``SGLANG_MIN_CAPABILITY``, ``GGUF_MIN_CAPABILITY``).
    ``fmt`` "file" with ``spec`` a .gguf file: the same GGUF checks, over the file's own tensor types. The one home
    of these checks: ``check_engine_runs`` (fit, estimate_inference), the engine rule and recommend's ladder ask it
    with their device; ``engine_weights`` with ``device`` None, the GGUF types alone, which need no device."""
    bnb_moe = bnb_moe_refused(engine, fmt, spec) or mxfp4_dense_refused(fmt, spec) or nvfp4_refused(engine, fmt)
    if bnb_moe is not None:  # on any device
        return bnb_moe
    name, gate = _MIN_CAPABILITY.get(engine, ("", {}))
    need = gate.get(fmt)
    gguf_file = fmt == "file" and spec is not None and spec.file_weights is not None and spec.file_weights.gguf
    if (fmt.startswith("gguf:") or gguf_file) and engine in GGUF_ENGINES:
        lacking = gguf_file_refused(engine, spec) if gguf_file else gguf_type_refused(engine, fmt)
        if lacking is not None:
            return lacking
        need = GGUF_MIN_CAPABILITY
    if need is None or device is None:  # no gate for this engine and format, or no device to gate
        return None
    have = device.capability
    if have is None or have >= need:
        return None
    what = f"GGUF file {spec.file_weights.path}" if gguf_file and spec and spec.file_weights else fmt
    return (f"{name} refuses {what} on {device.id} ({device.architecture}, compute capability {have / 10:.1f}): its "
            f"kernels need {need / 10:.1f} or newer")


def runs_on_llamacpp_instead(spec: ModelSpec | None, weights: str | None) -> str | None:
    """The GGUF llama.cpp would run in place of the checkpoint ``spec`` ships when no format is named (its
    converter's counterpart, GGUF_FROM_STORED); None when a format is named, the model is a file, or the stored
    format has no GGUF counterpart."""
    if spec is None or weights is not None or spec.file_weights is not None:
        return None
    return GGUF_FROM_STORED.get(stored_format(spec)[0])


def gguf_stand_in(spec: ModelSpec) -> tuple[str, str] | None:
    """(format, why) llama.cpp runs with no format named for a checkpoint whose stored format has no GGUF counterpart
    (an FP8, GPTQ, AWQ or bitsandbytes checkpoint: not in ``GGUF_FROM_STORED``): the first rung of ``GGUF_LADDER``
    (best first) whose weights (``rung_bytes``) are no larger than the checkpoint's, the rule ``format_ladder`` starts
    llama.cpp's ladder with, so fit's default is the format ``models --fits-on`` and ``recommend`` try first; where
    every rung is larger (no stored format today), the smallest, Q2_K, said so. llama.cpp's quantizer writes each
    of these types for any architecture it runs (tools/quantize/quantize.cpp ``QUANT_OPTIONS``), from the
    unquantized weights. None when the checkpoint has a GGUF counterpart, is a model file, or is served in a closed
    set of formats (an encoder-decoder: ``model_warnings.serving_formats``)."""
    if spec.file_weights is not None or serving_formats(spec) is not None:
        return None
    stored, group, _ = stored_format(spec)
    if stored in GGUF_FROM_STORED or stored.startswith("gguf:"):
        return None
    limit = rung_bytes(spec, stored, group, "llamacpp")
    fits = [f for f in GGUF_LADDER if rung_bytes(spec, f, engine="llamacpp") <= limit]
    ladder = " -> ".join(f.removeprefix("gguf:").upper() for f in GGUF_LADDER)
    if fits:
        return fits[0], (f"{stored} has no GGUF counterpart: the highest-quality GGUF quant no larger than the "
                         f"{stored} checkpoint, llama.cpp's format ladder {ladder} (as models --fits-on and recommend "
                         "start it); name another with weights")
    return GGUF_LADDER[-1], (f"{stored} has no GGUF counterpart and every GGUF quant of llama.cpp's ladder ({ladder}) "
                             f"is larger than the {stored} checkpoint: the smallest; name another with weights")


def requested_format(spec: ModelSpec | None, weights: str | None) -> str | None:
    """The format an engine is asked to load: ``weights`` when named, else the checkpoint's stored format (None for
    a model file or no model)."""
    if weights is not None:
        return normalize_format(weights)
    if spec is None or spec.file_weights is not None:
        return None
    return stored_format(spec)[0]


# vLLM's CUDA platform offers bf16 from compute capability 8.0 only (vllm/platforms/cuda.py
# CudaPlatformBase.supported_dtypes: "Pascal, Volta and Turing NVIDIA GPUs, BF16 is not supported"); with --dtype
# auto it loads a bf16 checkpoint in the first supported dtype, fp16 (vllm/config/model.py, dtype resolution)
VLLM_BF16_MIN_CAPABILITY = 80


def engine_dtype_note(engine: str, fmt: str, dtype: str, device: Device) -> str | None:
    """A warning when ``engine`` runs bf16 (weights ``fmt`` or compute ``dtype``) as fp16 on this GPU; None else."""
    if engine != "vllm" or "bf16" not in (fmt, dtype):
        return None
    have = device.capability
    if have is None or have >= VLLM_BF16_MIN_CAPABILITY:
        return None
    return (f"vLLM runs bf16 as fp16 on {device.id} ({device.architecture}, compute capability {have / 10:.1f}: no "
            f"bf16 below {VLLM_BF16_MIN_CAPABILITY / 10:.1f}); the same 2 bytes per value, so the memory is unchanged")


def check_engine_runs(engine: str, fmt: str, device: Device, spec: ModelSpec | None = None) -> None:
    """Raise InputError (exit 2) when ``engine_refuses`` the format (``spec``'s .gguf file for "file") on the
    device: fit and estimate_inference."""
    refused = engine_refuses(engine, fmt, device, spec)
    if refused is not None:
        # the fields named as each surface names them (--weights / weights; errors.FieldError.renamed)
        raise FieldError("weights", f"{refused}; give other weights, another engine or device", also=("engine",))


def given_format_why(weights: str) -> str:
    """The ``why`` of a format the user named: "given", or the alias it resolved from ("alias 'int4' -> gptq-int4:
    ..."), which every face shows beside the format (``Assumption.mark``), so 'int4' never silently means GPTQ."""
    fmt = format_alias(weights)
    if fmt is None:
        return "given"
    return f"alias {weights.strip()!r} -> {fmt}, as llmsizer reads that name; name the format to size another"


@dataclass
class FormatChoice:
    """The format an estimate uses ('file' for a model file's exact bytes), its group size, and why."""

    fmt: str
    group_size: int
    assumptions: list[Assumption] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# Perplexity increase over the unquantized model of llama.cpp's file types, as llama.cpp's own quantize help lists
# them (tools/quantize/quantize.cpp ``QUANT_OPTIONS`` @ 03161a4e: "+3.5199 ppl @ Llama-3-8B" for Q2_K, ...).
GGUF_PPL_INCREASE = {
    "gguf:q2_k": 3.5199, "gguf:q2_k_s": 3.1836, "gguf:q3_k_s": 1.6321, "gguf:q3_k_m": 0.6569, "gguf:q3_k_l": 0.5562,
    "gguf:q4_0": 0.4685, "gguf:q4_1": 0.4511, "gguf:q4_k_s": 0.2689, "gguf:q4_k_m": 0.1754, "gguf:q5_0": 0.1316,
    "gguf:q5_1": 0.1062, "gguf:q5_k_s": 0.1049, "gguf:q5_k_m": 0.0569, "gguf:q6_k": 0.0217, "gguf:q8_0": 0.0026,
}
# the quality line: a format losing more perplexity than Q4_0, the plain 4-bit type, in that same table
QUALITY_PPL_LIMIT = GGUF_PPL_INCREASE["gguf:q4_0"]


_UNQUANTIZED = ("bf16", "fp16", "f16", "fp32", "f32")


def quality_rating(fmt: str, stored: str | None = None) -> tuple[str, float | None]:
    """The one home of the weight-quality rule, read by the cell (:func:`format_quality`) and the warning
    (:func:`quality_warning`): (kind, perplexity increase on Llama-3-8B from llama.cpp's quantize table,
    :data:`GGUF_PPL_INCREASE`, None where it has no row). Kinds: 'as released' where ``stored`` (the model's
    published format, weight_formats.py ``stored_format``) is itself quantized (gpt-oss's MXFP4 experts, an FP8
    checkpoint) and ``fmt`` is that format, its GGUF file type (:data:`GGUF_FROM_STORED`) or a 16/32-bit copy of it
    (an up-cast holds the same quantized values); 're-quantized' for any other format of such a model (the table
    measures each type from a 16-bit model, not from an already quantized one); else 'table' (a row of the table),
    'unquantized' (16 and 32 bits) or 'not rated' (no table on one scale covers it)."""
    ppl = GGUF_PPL_INCREASE.get(fmt)
    if stored is not None and stored not in _UNQUANTIZED:
        if fmt in (stored, GGUF_FROM_STORED.get(stored)) or fmt.removeprefix("gguf:") in _UNQUANTIZED:
            return "as released", None
        return "re-quantized", ppl
    if ppl is not None:
        return "table", ppl
    return ("unquantized" if fmt.removeprefix("gguf:") in _UNQUANTIZED else "not rated"), None


def format_quality(fmt: str, stored: str | None = None) -> str:
    """A weight format's quality as one short cell (``models --fits-on``'s quality column, its JSON and the web page's),
    by :func:`quality_rating`: '+X ppl' from llama.cpp's table, marked 'below Q4_0' past :data:`QUALITY_PPL_LIMIT`
    (where :func:`quality_warning` warns); 'unquantized'; 'as released (mxfp4)'; 'not rated (re-quantized from
    mxfp4)'; 'not rated'."""
    kind, ppl = quality_rating(fmt, stored)
    if kind == "as released":
        return f"as released ({stored})"
    if kind == "re-quantized":
        return f"not rated (re-quantized from {stored})"
    if kind == "table" and ppl is not None:
        return f"+{ppl:.2f} ppl" + (" (below Q4_0)" if ppl > QUALITY_PPL_LIMIT else "")
    return kind


def quality_warning(fmt: str, stored: str | None = None) -> str | None:
    """A warning when weight format ``fmt`` (of a model published as ``stored``) costs more quality than
    :data:`QUALITY_PPL_LIMIT` in llama.cpp's table (:func:`quality_rating`, the one home of that rule: every estimate
    carries it, so fit, fit --auto, recommend and plan show it). A type past it that re-quantizes a quantized release
    is warned as not rated (the table measures it from a 16-bit model), as the cell says; None otherwise."""
    kind, ppl = quality_rating(fmt, stored)
    if ppl is None or ppl <= QUALITY_PPL_LIMIT or kind not in ("table", "re-quantized"):
        return None
    name = fmt.removeprefix("gguf:").upper()
    if kind == "re-quantized":
        return (f"{name} re-quantizes the model's {stored} release: its quality is not rated (llama.cpp's table, "
                f"tools/quantize/quantize.cpp QUANT_OPTIONS, gives {name} +{ppl:.2f} perplexity on Llama-3-8B from a "
                f"16-bit model, more than Q4_0's +{QUALITY_PPL_LIMIT:.2f}, not from an already quantized one); the "
                f"release's own format ({GGUF_FROM_STORED.get(str(stored), stored)}) keeps its quality")
    return (f"{name} costs quality: +{ppl:.2f} perplexity on Llama-3-8B, more than Q4_0's +{QUALITY_PPL_LIMIT:.2f} "
            "(llama.cpp tools/quantize/quantize.cpp QUANT_OPTIONS); a larger format (Q4_K_M: "
            f"+{GGUF_PPL_INCREASE['gguf:q4_k_m']:.2f}) keeps more of the model")


def engine_weights(spec: ModelSpec, engine: str, weights: str | None, group_size: int = GROUP_SIZE_DEFAULT,
                   group_size_given: bool = False, dtype: str | None = None) -> FormatChoice:
    """The weight format ``engine`` runs for ``spec`` when the user asks for ``weights`` (None: the default);
    ``group_size_given``: the user gave ``group_size`` (a given 128 is not the default); ``dtype``: the compute dtype
    the user gave (None: not given). An unquantized checkpoint (bf16, fp16, fp32), stored or named in ``weights``, is
    loaded in a given ``dtype`` by the engines that take one (``cast_to_dtype``), as a request's ``precision`` pins it
    (``unquantized_format``)."""
    out = FormatChoice("", group_size)
    fw = spec.file_weights
    if weights is None and fw is not None:
        if engine == "llamacpp" and not fw.gguf:
            raise InputError("engine llamacpp runs GGUF files; give a .gguf file or a GGUF format (--weights q4_k_m)")
        _refuse_gguf_types(engine, "file", spec)
        if not fw.gguf or keeps_gguf(engine):
            return FormatChoice("file", group_size, [Assumption("weights", "file", True,
                                                                f"exact tensor bytes read from {fw.path}")])
        # a GGUF file on an engine that dequantizes it on load: the file's format, then the rule below (bf16)
        fmt, why = file_kernel_format(spec)
        out.assumptions.append(Assumption("weights", fmt, True, why))
    elif weights is None:
        fmt, out.group_size, why = stored_format(spec)
        stand_in = gguf_stand_in(spec) if engine == "llamacpp" and not fmt.startswith("gguf:") else None
        if stand_in is not None:  # no GGUF counterpart: the ladder's first rung, named as the default it is
            fmt, why = stand_in
            out.group_size = rung_group_size(spec, fmt, None)
            out.assumptions.append(Assumption("weights", fmt, True, why))
        else:
            if engine == "llamacpp" and not fmt.startswith("gguf:"):
                if fmt not in GGUF_FROM_STORED:  # an encoder-decoder's closed set (refused by its own rule)
                    raise InputError(f"engine llamacpp runs GGUF formats; {spec.name} is stored as {fmt!r}, which has "
                                     "no GGUF counterpart: name one (e.g. --weights q4_k_m or q8_0)")
                fmt, why = GGUF_FROM_STORED[fmt], f"the GGUF llama.cpp converts the checkpoint to ({why} -> {fmt})"
            cast = cast_to_dtype(engine, fmt, dtype)
            if cast is not None:
                fmt, why = cast, f"{why}, loaded in the dtype given ({cast}): {CAST_SOURCE}"
            out.assumptions.append(Assumption("weights", fmt, True, f"checkpoint's stored format ({why})"))
    else:
        fmt = normalize_format(weights)
        cast = cast_to_dtype(engine, fmt, dtype)  # an unquantized format named beside a dtype: loaded in the dtype
        if cast is not None:
            out.assumptions.append(Assumption("weights", cast, False, f"{given_format_why(weights)}, loaded in the "
                                              f"dtype given ({cast}): {CAST_SOURCE}"))
            fmt = cast
        else:
            out.assumptions.append(Assumption("weights", fmt, False, given_format_why(weights)))
        if not group_size_given:  # the checkpoint's own group at its own format, as the format ladder sizes it
            out.group_size = rung_group_size(spec, fmt, group_size)
        if engine == "llamacpp" and not fmt.startswith("gguf:"):
            if fmt not in ("fp32", "fp16", "bf16"):
                raise InputError(f"engine llamacpp runs GGUF formats (e.g. q4_k_m, q8_0), not {fmt!r}")
            fmt = GGUF_FROM_STORED[fmt]
            out.warnings.append(f"llama.cpp runs GGUF files: weights taken as {fmt}")
    bnb_moe = bnb_moe_refused(engine, fmt, spec)
    if bnb_moe is not None:
        raise FieldError("weights", f"{bnb_moe}; give other weights or another engine", also=("engine",))
    dense_mxfp4 = mxfp4_dense_refused(fmt, spec)
    if dense_mxfp4 is not None:
        raise FieldError("weights", f"{dense_mxfp4}; give other weights (e.g. fp8, awq-int4, q4_k_m)")
    no_nvfp4 = nvfp4_refused(engine, fmt)
    if no_nvfp4 is not None:
        raise FieldError("weights", f"{no_nvfp4}; give other weights or another engine", also=("engine",))
    if fmt.startswith("gguf:") and engine in GGUF_ENGINES:
        _refuse_gguf_types(engine, fmt, spec)
        out.assumptions.append(Assumption(
            "gguf_kernels", fmt, True,
            f"{GGUF_ENGINES[engine][0]} keeps the GGUF tensors in their GGML types (its GGUF quantization method, "
            "quantization/gguf.py): the weights count the GGUF bytes llama.cpp's are sized with; its decode is taken "
            f"at {GGUF_ENGINES[engine][0]}'s own streaming rate and step, not llama.cpp's (no measurement of its "
            "GGUF kernels is in validation/)"))
    elif not keeps_gguf(engine) and fmt.startswith("gguf:"):
        out.warnings.append(f"{engine} dequantizes GGUF files on load (transformers docs 'GGUF and interaction "
                            f"with Transformers'); weights counted in bf16 instead of {fmt}")
        fmt = "bf16"
    elif engine == "transformers" and fmt == CT_METHOD:
        plain, _why = dtype_format(spec)
        out.warnings.append(f"transformers decompresses a compressed-tensors checkpoint on its first forward pass "
                            f"({CT_TRANSFORMERS_SOURCE}); weights counted in {plain} instead of {fmt}")
        fmt = plain
    if fmt in GROUPED:
        out.assumptions.append(Assumption("group_size", out.group_size, weights is None or not group_size_given,
                                          f"quantization group size (GPTQ/AWQ default {GROUP_SIZE_DEFAULT})"))
    if fmt == "mxfp4" and engine == "transformers":
        out.warnings.append("transformers keeps MXFP4 experts packed only with the triton/kernels MXFP4 path on "
                            "recent GPUs; otherwise it dequantizes them to bf16 (pass --weights bf16 to size that)")
    quality = quality_warning(fmt, stored_format(spec)[0])
    if quality is not None:
        out.warnings.append(quality)
    out.fmt = fmt
    return out


def _refuse_gguf_types(engine: str, fmt: str, spec: ModelSpec) -> None:
    """Raise InputError (exit 2) when ``engine`` lacks a GGUF type of ``fmt`` ("file": ``spec``'s .gguf file), on
    any device (``engine_refuses`` without one). Asked while the weights are chosen, before the engine's composition:
    SGLang's sizes vLLM's pool on the same card (inference/sglang.py ``_compare_vllm``, a nested estimate_inference),
    so a refusal left to ``check_engine_runs`` after composing came from that nested vLLM estimate, in vLLM's name,
    for an SGLang question."""
    lacking = engine_refuses(engine, fmt, None, spec)
    if lacking is not None:
        raise FieldError("weights", f"{lacking}; give other weights or another engine", also=("engine",))


def unquantized_format(spec: ModelSpec, precision: str | None = None) -> tuple[str, str]:
    """(format, why) a user who says "unquantized" (a request's ``quantization: none``) is served in: ``precision``
    when given (bf16, fp16, fp32), else the checkpoint's own dtype (``formulas.weight_formats.dtype_format``: its
    ``torch_dtype``). Pinned: no search over quantized formats. (A request with no ``quantization`` key lets the plan's
    search range over formats.)"""
    if precision is not None:
        return normalize_format(precision), "quantization: none at the precision given"
    fmt, why = dtype_format(spec)
    return fmt, f"quantization: none at the checkpoint's dtype ({why})"


# The engines whose dtype casts an unquantized checkpoint's weights on load: transformers' from_pretrained(dtype=...)
# (modeling_utils.py PreTrainedModel.from_pretrained: "load the model under a specific dtype"), vLLM's --dtype
# (vllm/config/model.py @ 0052a5b8, ModelConfig.dtype "Data type for model weights and activations"; .quantization:
# with none "use dtype to determine the data type of the weights") and SGLang's --dtype (server_args.py, the same
# words). llama.cpp runs the GGUF file's own types: no dtype applies.
CAST_SOURCE = ("transformers from_pretrained(dtype=...), vLLM and SGLang --dtype: the data type of the model weights "
               "and activations")
UNQUANTIZED_DTYPES = ("fp32", "fp16", "bf16")


def cast_to_dtype(engine: str, fmt: str, dtype: str | None) -> str | None:
    """The format an unquantized checkpoint stored as ``fmt`` is loaded in when the user gives the compute ``dtype``
    (None: not given) on ``engine``: ``dtype`` where it differs from ``fmt`` and the engine casts (see
    ``CAST_SOURCE``), else None (kept as stored: a quantized format, llama.cpp's GGUF, no dtype given)."""
    if dtype is None or engine == "llamacpp" or fmt not in UNQUANTIZED_DTYPES or dtype == fmt:
        return None
    return normalize_format(dtype) if dtype in UNQUANTIZED_DTYPES else None


def file_kernel_format(spec: ModelSpec) -> tuple[str, str]:
    """(format, why) whose kernels run a model file: the speed model's efficiency class and compute dtype follow it,
    while the bytes read stay the file's exact ones. A GGUF file: its largest tensor type by bytes other than F32
    (norms and biases), as the llama_ftype llama-quantize names after that type (Q4_K -> q4_k_m, Q8_0 -> q8_0);
    a safetensors folder: its stored format (quantization_config / torch_dtype)."""
    fw = spec.file_weights
    if fw is None or not fw.gguf:
        fmt, _group, why = stored_format(spec)
        return fmt, f"the checkpoint's stored format ({why})"
    types = [t for t, _ in fw.by_dtype if t != "F32"] or [t for t, _ in fw.by_dtype]
    for t in types:  # by_dtype is sorted by bytes, largest first
        names = [n for n, ggml in GGUF_FTYPES.items() if ggml == t]
        for name in (t.lower(), t.lower() + "_m", *names):
            if name in names:
                return "gguf:" + name, f"the file's largest tensor type {t} ({fw.path})"
    raise InputError(f"{fw.path}: no GGUF file type runs its tensor types ({', '.join(types)}); "
                     "give --weights to name the format")


def weights_asked(fmt: str) -> str | None:
    """The ``weights`` argument that asks an estimate for a ``format_ladder`` rung: None for "file" (a model file's
    exact bytes are what an estimate answers with no format named; "file" is no format a user can name)."""
    return None if fmt == "file" else fmt


def rung_group_size(spec: ModelSpec, fmt: str, group_size: int | None) -> int:
    """The GPTQ/AWQ group a ``format_ladder`` rung is sized at: the checkpoint's own (``stored_format``, what
    ``engine_weights`` sizes with no format named) for the checkpoint's stored format, else ``group_size`` (given;
    None: ``GROUP_SIZE_DEFAULT``). recommend asks each rung with it and ranks the rung by ``rung_bytes`` at it, so an
    AWQ checkpoint at group 64 is sized (memory and speed) as ``infer``/``fit`` size it, not at 128."""
    stored, group, _ = stored_format(spec)
    if fmt == stored and fmt in GROUPED:
        return group
    return GROUP_SIZE_DEFAULT if group_size is None else group_size


@lru_cache(maxsize=1024)
def format_ladder(spec: ModelSpec, engine: str, weights: str | None = None, fp8: bool = True) -> tuple[str, ...]:
    """The weight formats to try on ``engine``, best first (module rule): a given format alone; else the default
    (``engine_weights``; "file" for a GGUF file the engine keeps as it is), then the engine's rungs smaller than it
    (``fp8``: the device runs FP8 kernels); of a model served in a closed set of formats (an encoder-decoder,
    ``model_warnings.serving_formats``) only those: a rung the estimate refuses is no answer to a search. Memoized
    on its arguments (the spec by identity): a catalog search asks it once per candidate device, with the same
    answer for every device of one FP8 support."""
    if weights:
        return (normalize_format(weights),)
    rungs = GGUF_LADDER if engine == "llamacpp" else tuple(f for f in VLLM_LADDER if fp8 or f != "fp8")
    rungs = tuple(f for f in rungs if f in (serving_formats(spec) or (f,)))
    fw = spec.file_weights
    if fw is not None and fw.gguf and keeps_gguf(engine):
        # a GGUF file is its own format (per-tensor types no ladder rung names): first its exact bytes, then the
        # rungs smaller than them
        return ("file", *(f for f in rungs if rung_bytes(spec, f) < fw.total_bytes))
    try:
        # a model file's exact bytes are one answer of their own; the ladder sizes the checkpoint's formats
        # (a spec without a model file is itself that checkpoint: no copy, whose new identity would miss every
        # per-spec memo of the weight bytes)
        first = engine_weights(spec if spec.file_weights is None else replace(spec, file_weights=None), engine, None)
    except InputError:  # no counterpart of the shipped format on this engine: rungs no larger than the checkpoint
        stored, group, _ = stored_format(spec)
        limit = rung_bytes(spec, stored, group, engine)
        return tuple(f for f in rungs if rung_bytes(spec, f, engine=engine) <= limit)
    top = rung_bytes(spec, first.fmt, first.group_size, engine)
    return (first.fmt, *(f for f in rungs if f != first.fmt and rung_bytes(spec, f, engine=engine) < top))


def rung_bytes(spec: ModelSpec, fmt: str, group_size: int = GROUP_SIZE_DEFAULT, engine: str | None = None,
               capability: int | None = None) -> int:
    """The weight bytes a format is ranked by in a search (``format_ladder``, recommend's weights-alone check):
    ``weight_bytes`` at the format catalog's defaults (formulas/weight_formats.py ``GROUP_SIZE_DEFAULT``, unless a
    group size is known; ``OTHER_BYTES_DEFAULT``), what an estimate of that format with no group size or compute
    dtype given holds, so a rung is never ranked by other sizes than the estimate's. ``engine``: the engine the rung
    runs on, whose fused MoE experts a bitsandbytes format may keep in the compute dtype (``serving_fused_experts``)
    and whose own dtype for some tensors wins (formulas/weight_formats.py ``ENGINE_TENSOR_BYTES``: SGLang's fp32 DSA
    indexer ``weights_proj``), as the estimate's weights count them (inference/compose.py passes the engine to
    ``weight_bytes``); None: experts quantized, no engine's own dtype (a bound that rejects nothing an engine could
    fit). ``capability``: the device's, where the engine's own dtype or layout depends on it (vLLM's fp32 gate; the
    MXFP4 MoE backend vLLM selects, formulas/vllm_mxfp4.py): estimate/device.py ``device_weights_capability`` at
    this ``fmt``, the estimate's rule; None: not known (sized as on Hopper)."""
    kept = engine is not None and serving_fused_experts(spec, engine, fmt)
    # vLLM's MXFP4 MoE holds more than the checkpoint's experts on the backend the GPU selects (eq. X1-X3: Hopper's
    # swizzled scales, Marlin's / FlashInfer's padding, float32 biases), as its estimate's weights hold them
    extra = vllm_mxfp4_resident_extra(spec, fmt, capability=capability) if engine == "vllm" else 0
    return weight_bytes(spec, fmt, group_size, OTHER_BYTES_DEFAULT, fused_experts=kept, engine=engine,
                        capability=capability).total + extra


# Engines that keep one copy of a tied embedding however many names the checkpoint stores it under: transformers
# loads a stored lm_head.weight and frees it when from_pretrained re-ties the two names after the last tensor
# (formulas/checkpoint_loading.py eq. L1: a load-time copy, counted there, not resident); vLLM never allocates or
# loads it (vllm/model_executor/models/qwen2.py @ 013a2792 Qwen2ForCausalLM.__init__: ``self.lm_head =
# self.model.embed_tokens`` when tie_word_embeddings; load_weights: ``AutoWeightsLoader(self,
# skip_prefixes=["lm_head."])`` when tied; llama.py the same). A .gguf's output tensor is kept as stored (llama.cpp
# builds it when the file holds one); SGLang was not read at a current commit (kept as stored).
TIED_HEAD_DROPPED = ("transformers", "vllm")


def resident_file_weights(spec: ModelSpec, wb: WeightBytes, engine: str | None
                          ) -> tuple[WeightBytes, Assumption | None]:
    """The bytes of weights read from safetensors (format 'file') that ``engine`` keeps for the whole run: the file's
    own, less a stored ``lm_head.weight`` of a tied-embedding model on :data:`TIED_HEAD_DROPPED` (before, counted
    resident, so a folder read as weights 'file' held it at every phase: +272 MB on an AWQ Qwen2.5-0.5B, review15
    D3b). Anything else: ``wb`` unchanged, no assumption."""
    fw, head = spec.file_weights, wb.by_component.get("lm_head", 0)
    if (wb.format != "file" or fw is None or fw.gguf or not spec.tie_word_embeddings or not head
            or engine not in TIED_HEAD_DROPPED):
        return wb, None
    storage = dict(wb.by_storage)
    kind = next((k for k in ("F16", "BF16", "F32") if storage.get(k, 0) >= head), None)
    if kind is not None:  # the header's dtype totals do not say which dtype lm_head is in: an unquantized one
        storage[kind] -= head
    kept = replace(wb, total=wb.total - head, by_component={k: v for k, v in wb.by_component.items() if k != "lm_head"},
                   by_storage={k: v for k, v in storage.items() if v})
    how = ("loaded, then freed when from_pretrained re-ties it to the embedding (the load-time copy: "
           "tied_copy_on_load)" if engine == "transformers" else "skipped by vLLM's loader (lm_head is embed_tokens)")
    return kept, Assumption("stored_tied_lm_head", head, True,
                            f"the weight files store lm_head.weight beside the tied embedding ({head:,} B, read from "
                            f"their headers): not resident, {how}")
