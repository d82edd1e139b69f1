"""Engine profiles: how each serving engine allocates memory, as named, cited constants.

Every number here is a documented parameter, never a hidden factor. A ``Span`` is (low, expected, high)
where the answer depends on driver/allocator behaviour we cannot see from a config.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..formulas.speed import sm_streaming_bandwidth
from ..frozen import fast_init
from ..specs.workload import engine_version_patch, parse_engine_version, refuse_async_scheduling
from ..units import GiB, MiB
from . import efficiency as E

if TYPE_CHECKING:
    from ..specs.model import ModelSpec


@dataclass(frozen=True)
class Span:
    low: int
    expected: int
    high: int
    source: str


# CUDA context + kernel images + library handles: memory nvidia-smi shows but torch's allocator does not
# (NVML process memory - torch.cuda.memory_reserved()). Measured by `llmsizer measure` on the lent H200
# (validation/measured/gpu-h200-2026-12-04.jsonl, every record's measured.cuda_context_bytes; NVIDIA H200, driver
# 580.159.04, CUDA 13.0, torch 2.11.0+cu130, transformers 5.17.0): 648,871,936 B right after the first CUDA tensor
# (cuda_context_initial_bytes, all 23 records), then more as kernels are loaded on first use (CUDA lazy module
# loading, the default since CUDA 11.7): 721,420,288 B (688 MiB) at the end of every inference run (12 records),
# 794,820,608 B (758 MiB) at the end of every training run (11: the backward and optimizer kernels too).
# The span covers other setups: other tools' constants (gguf-parser-go 250 MiB, Ollama 457 MiB, gpu_poor 650 MB,
# shared/research/anchors.md) for leaner runtimes and older or smaller GPUs at the low end, eager module loading
# (CUDA_MODULE_LOADING=EAGER, or CUDA before 11.7: every kernel image of the libraries loaded at start-up) at 1 GiB.
_CUDA_CONTEXT_SOURCE = ("measured: NVML process memory - torch reserved, validation/measured/gpu-h200-2026-12-04.jsonl "
                        "(H200, driver 580.159.04, CUDA 13.0, torch 2.11.0+cu130)")
CUDA_CONTEXT = Span(250 * MiB, 721_420_288, 1 * GiB,
                    _CUDA_CONTEXT_SOURCE + ": 688 MiB after inference; span: other tools' constants (250 MiB) to "
                    "eager module loading (1 GiB)")
CUDA_CONTEXT_TRAINING = Span(250 * MiB, 794_820_608, 1 * GiB,
                             _CUDA_CONTEXT_SOURCE + ": 758 MiB after training (backward and optimizer kernels "
                             "loaded too); span: other tools' constants (250 MiB) to eager module loading (1 GiB)")

# A native process (llama.cpp: no PyTorch, its own ggml kernels and cuBLAS): not measured by llmsizer; the range of
# other tools' constants, Ollama's (a llama.cpp server) in the middle. The measured PyTorch figures above hold torch's
# own kernel images and do not speak for it.
CUDA_CONTEXT_NATIVE = Span(250 * MiB, 500 * MiB, 1 * GiB,
                           "range of other tools' constants (gguf-parser-go 250 MiB, Ollama 457 MiB, gpu_poor 650 MB); "
                           "not measured for a native (non-PyTorch) process")

# Resident memory of a Python process after `import torch, transformers` (no model): measured on the
# llmsizer CI machine (x86_64, torch 2.13.0+cpu, transformers 5.24.0): 242 MiB peak RSS, two runs.
TORCH_HOST_RUNTIME = Span(200 * MiB, 250 * MiB, 500 * MiB,
                          "measured: peak RSS after importing torch 2.13.0 + transformers 5.24.0 = 242 MiB")

# llama.cpp process without a model: a native binary, no Python.
LLAMACPP_HOST_RUNTIME = Span(20 * MiB, 60 * MiB, 150 * MiB,
                             "llama.cpp is a native binary; gguf-parser-go budgets 150 MiB footprint")

# vLLM CUDA-graph pool ('Graph capturing finished in N secs, took X GiB'; newer releases estimate it and
# deduct it from the KV pool). Observed 0.10-1.03 GiB on one H100 (llm-d/llm-d-benchmark
# config_explorer/empirical-vllm-memory-results.md @259334868c), 0.45 GiB (run-ai/runai-model-streamer#67).
VLLM_CUDA_GRAPHS = Span(int(0.1 * GiB), int(0.4 * GiB), int(1.05 * GiB),
                        "vLLM logs: 0.10-1.03 GiB on H100 (llm-d empirical-vllm-memory-results.md); 0 with enforce_eager")

# vLLM 'non-torch memory' inside the pool (NCCL buffers, cuBLAS workspaces): 0.13-0.14 GiB on one H100,
# 0.55 GiB per GPU at TP=2 (llm-d table); 0.35-0.39 GiB in V0 logs (vllm-project/vllm#10517, #11251).
VLLM_NON_TORCH = Span(int(0.03 * GiB), int(0.13 * GiB), int(0.4 * GiB),
                      "vLLM logs 'non-torch memory' on one GPU (llm-d table; vllm#10517, #11251, #13882)")
# With tensor parallelism NCCL's communicator buffers add to it: 0.55 GiB per GPU at TP=2 (llm-d table),
# 0.34-0.43 GiB at TP=4 (vllm-project/vllm#16570).
VLLM_NON_TORCH_TP = Span(int(0.3 * GiB), int(0.55 * GiB), int(0.8 * GiB),
                         "vLLM logs 'non-torch memory' with TP (llm-d table TP=2: 0.55 GiB; vllm#16570 TP=4)")

# Bytes the vLLM profile run's dummy sampler holds per logit (num_seqs x vocab): fp32 logits plus the
# sort/softmax/cumsum copies of top-k/top-p sampling. Derived, not tuned: peak activation / (1024 x vocab)
# over the five single-source rows of the llm-d H100 table (Llama-3.1-8B 4.76 GiB, Qwen3-0.6B 5.56,
# Qwen3-32B 5.64, gpt-oss-20b 7.38, Llama-3.3-70B-FP8 TP2 4.84) = 38.4-39.6 B (mean 38.9); checked against
# other rows in tests/validation/test_vllm_logs.py.
VLLM_SAMPLER_BYTES_PER_LOGIT = 38.9

# The releases whose V1 sampler runs top-k/top-p through FlashInfer by default on CUDA when FlashInfer is installed
# (the vllm/vllm-openai images and gpustack/runner's cuda-vllm images install it: gpustack/runner pack/cuda/Dockerfile
# @abc9b3e VLLM_VERSION=0.10.2, VLLM_FLASHINFER_VERSION=0.3.0; a bare `pip install vllm` of these releases does not,
# FlashInfer being the [flashinfer] extra of the 0.10.2 wheel): vllm/v1/sample/ops/topk_topp_sampler.py
# ``elif envs.VLLM_USE_FLASHINFER_SAMPLER is not False: self.forward = self.forward_cuda`` (0.10.1.1 line 41, 0.10.2
# line 49, 0.11.0 line 46; the variable unset is None). vllm-project/vllm#26859 ('Disable FlashInfer sampler by
# default', merged 2025-10-15, after 0.11.0) made it opt-in: 0.11.1 (lines 34-47 of its wheel: forward_cuda only
# when VLLM_USE_FLASHINFER_SAMPLER is set; probe29 D1), 0.14.1 and 0.19.1 (line 35 of each) take forward_native
# unless VLLM_USE_FLASHINFER_SAMPLER=1. So the rule is [0.10.0, 0.11.1) by patch release (``release_patch``; 0.11
# and 0.11.0 are 0.11.0). Earlier releases (V0, the first V1 ones) are not read: they keep the native constant above.
VLLM_FLASHINFER_SAMPLER_RELEASES = ((0, 10, 0), (0, 11, 1))  # [first, until)
# Bytes per logit the dummy sampler holds on the FlashInfer path beside the model-dtype logits: three float32
# copies. gpu_model_runner._dummy_sampler_run (0.10.2 line 2849) keeps compute_logits' logits (model dtype) while
# the sampler runs with top_k = vocab - 1 and top_p = 0.9 (lines 2859-2860, so both filters); Sampler.forward makes
# float32 logits (sampler.py line 87: copy 1; temperature divides them in place, line 134); forward_cuda calls
# flashinfer.sampling.top_k_top_p_sampling_from_logits (topk_topp_sampler.py line 251), which in flashinfer 0.3.0
# (flashinfer/sampling.py lines 980-981) takes masked_logits = top_k_mask_logits(logits, top_k) (torch.empty_like,
# line 374: copy 2) and probs = torch.softmax(masked_logits) (copy 3), then samples from probs without a sort.
VLLM_SAMPLER_FLASHINFER_FP32_COPIES = 3


@dataclass(frozen=True)
class EngineProfile:
    name: str
    mla_mode: str  # 'latent' caches (kv_lora_rank + rope) per token; 'expanded' caches full K and V
    window_extra: int  # tokens a sliding layer keeps beyond its window
    block_size: int | None  # paged KV block (None: contiguous)
    kv_dtype_default: str
    description: str
    source: str
    prefill_keeps_full_prompt: bool = False  # sliding layers still hold the whole prompt right after prefill
    # DSA indexer key cache (DeepSeek-V3.2): 'kv' at the KV dtype, 'fp8_scaled' FP8 + fp32 scale per 128
    # (formulas/kv_cache.py eq. 3)
    dsa_indexer_cache: str = "kv"
    # a DSA model's quantized latent (formulas/kv_cache.py eq. 7): 'plain' = eq. (2) at the KV dtype, 'fp8_ds_mla' =
    # vLLM's 656-B FP8-with-scale row for DeepSeek-V3.2 (SGLang's too under its flashmla_kv backend: by device,
    # sglang_dsa_latent_cache)
    dsa_latent_cache: str = "plain"
    # recurrent (Mamba / Gated DeltaNet) state, formulas/recurrent_state.py: conv columns kept beyond d_conv - 1, the
    # conv and SSM state dtypes ("model": the activation / model dtype) and where the rule is read
    conv_state_window: int = 0
    state_dtypes: tuple[str, str] = ("model", "model")
    state_source: str = ""
    # the KV cache dtypes the engine can store (canonical names of formulas/kv_cache.KV_DTYPE_BYTES): another is
    # refused, not sized -- before, `--engine vllm --kv-dtype q4_0` sized a cache vLLM cannot allocate
    kv_dtypes: tuple[str, ...] = ()
    kv_dtypes_source: str = ""
    # what stores each of ``kv_dtypes``, where it is not one tensor dtype (transformers: a cache class per dtype),
    # said when another dtype is refused (compose.py check_engine_kv_dtype)
    kv_dtypes_why: str = ""
    # what a given ``auto`` KV dtype is (compose._kv_dtype): None, the model's dtype (vLLM's and SGLang's own
    # kv_cache_dtype=auto, transformers' DynamicCache); else the engine has no 'auto' and this says why its default
    # (``kv_dtype_default``) stands for it
    kv_dtype_auto_why: str | None = None
    # the unquantized KV dtypes the engine stores only as the model's own dtype (compose.check_engine_kv_dtype with
    # the model dtype): another model dtype is refused; the model's own is the engine's 'auto', said by this note
    kv_dtypes_model_only: tuple[str, ...] = ()
    kv_dtypes_model_only_why: str = ""
    # the engine runs the model's own transformers module, which repeats K/V to every query head before caching
    # when ModelSpec.kv_repeated_in_transformers (Falcon new_decoder_architecture): formulas/kv_cache.py repeated_kv
    caches_repeated_kv: bool = False


# GGML's block types are llama.cpp's alone (-ctk/-ctv); the PyTorch engines store KV as a torch dtype.
# transformers: DynamicCache keeps the activation dtype, and QuantizedCache (transformers 5.24.0
# src/transformers/cache_utils.py L2213-2220: backend 'quanto', 'hqq' or 'fp8', any other a ValueError) stores
# float8_e4m3fn only in its fp8 backend (Fp8QuantizedLayer.fp8_dtype, L1018) and integers in the others (quanto
# nbits 2 or 4, L927; HQQ 1, 2, 3, 4 or 8, L975): no backend stores float8_e5m2, which vLLM and SGLang do
TRANSFORMERS_KV_DTYPES = ("fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "int8")
# the ones transformers stores in a QuantizedCache (the rest: DynamicCache); QuantizedCache refuses a model whose
# layers are not all full attention (cache_utils.py L2236-2243: ``set(layer_types) - {"full_attention"}``, a
# ValueError; layer types from get_layer_types_and_kwargs L1959-1988: sliding, chunked, linear / recurrent, KV-shared
# and MLP-only layers all count against it)
TRANSFORMERS_QUANTIZED_KV = ("fp8", "fp8_e4m3", "int8")
# the integer backends' group-wise layout (QuantizedLayer.__init__ defaults, cache_utils.py L804-817): one scale and
# one zero point per q_group_size elements in the compute dtype (HQQ, measured in tests/formulas/test_quantized_cache.py),
# and the newest tokens, at most residual_length - 1 (the flush at ``>= residual_length``, L854), in the compute dtype
TRANSFORMERS_KV_Q_GROUP_SIZE = 64
TRANSFORMERS_KV_RESIDUAL_LENGTH = 128
TRANSFORMERS_KV_GROUPED = ("int8",)  # HQQ nbits=8; fp8 (Fp8QuantizedLayer): one scale per tensor, no residual


def kv_layout(engine: str, kv_dtype: str, act_bytes: float) -> dict[str, float | int]:
    """The extra keywords of formulas/kv_cache.py ``kv_cache`` (eq. 6) for a KV cache of canonical dtype ``kv_dtype``
    on ``engine`` with activations of ``act_bytes`` bytes: transformers' group-wise QuantizedCache (int8: HQQ
    nbits=8) adds a scale and a zero per TRANSFORMERS_KV_Q_GROUP_SIZE elements and holds up to
    TRANSFORMERS_KV_RESIDUAL_LENGTH - 1 tokens unquantized; every other cache: none."""
    if engine != "transformers" or kv_dtype not in TRANSFORMERS_KV_GROUPED:
        return {}
    return {"q_group_size": TRANSFORMERS_KV_Q_GROUP_SIZE, "group_param_bytes": 2.0 * act_bytes,
            "residual_tokens": TRANSFORMERS_KV_RESIDUAL_LENGTH - 1, "residual_bytes": float(act_bytes)}


TRANSFORMERS = EngineProfile(
    name="transformers", mla_mode="latent", window_extra=0, block_size=None, kv_dtype_default="model",
    caches_repeated_kv=True,
    description="Hugging Face transformers generate(): DynamicCache grows with the sequence; a sliding layer holds "
                "the whole prompt right after prefill and `window` tokens during decoding; DeepSeek MLA caches the "
                "latent; weights as loaded.",
    source="transformers 5.24 cache_utils.py DynamicSlidingWindowLayer.update (stores a slice of the concatenated "
           "K/V: the slice keeps the whole tensor alive, so storage is the full prompt after prefill and `window` "
           "tokens after a decode step; measured in tests/formulas/test_kv_cache_forward.py); "
           "models/deepseek_v3/modeling_deepseek_v3.py caches [B, 1, T, kv_lora_rank] and [B, 1, T, qk_rope_head_dim]",
    prefill_keeps_full_prompt=True,
    kv_dtypes=TRANSFORMERS_KV_DTYPES,
    kv_dtypes_source="transformers 5.24 cache_utils.py: DynamicCache in the activation dtype; QuantizedCache "
                     "backends (transformers_kv_backend): fp8 (float8_e4m3fn), quanto (int2/int4), HQQ (1-8 bit "
                     "integers); no GGML block types, no float8_e5m2",
    kv_dtypes_why="DynamicCache: the activation dtype; QuantizedCache backends: fp8 stores float8_e4m3fn only, "
                  "HQQ nbits=8 int8, quanto int2/int4; transformers 5.24 cache_utils.py L1018, L975, L927, "
                  "L2213-2220",
    conv_state_window=1, state_dtypes=("model", "fp32"),
    state_source="transformers 5.24 cache_utils.py LinearAttentionLayer.lazy_initialization L1226-1230 (conv state "
                 "[B, channels, d_conv] in the activation dtype), update_recurrent_state L1284-1298 (zeros_like the "
                 "mixer's fp32 state; measured in tests/formulas/test_recurrent_state_forward.py)",
)
# The QuantizedCache backend of transformers that stores a KV cache of each dtype other than the activation dtype
# (transformers 5.24.0 src/transformers/cache_utils.py): QuantizedCache(backend=...) L2162-2245 picks the layer
# class; Fp8QuantizedLayer L1009-1076 stores float8_e4m3fn (L1018) with one scale per tensor, frozen at the first
# update (no residual window); QuantoQuantizedLayer L897-949 takes nbits 2 or 4 only (L927: qint2/qint4, L938);
# HQQQuantizedLayer L952-1006 takes nbits 1, 2, 3, 4 or 8 (L975). The integer backends keep the last
# residual_length - 1 (127) tokens in the activation dtype (QuantizedLayer L786-894), which kv_layout adds (eq. 6).
_TRANSFORMERS_KV_BACKEND = {
    "fp8": "QuantizedCache(backend='fp8') (Fp8QuantizedLayer: float8_e4m3fn, one scale per tensor)",
    "fp8_e4m3": "QuantizedCache(backend='fp8') (Fp8QuantizedLayer: float8_e4m3fn, one scale per tensor)",
    "int8": "QuantizedCache(backend='hqq', nbits=8) (quanto takes 2 or 4 bits only; a scale and a zero per 64 "
            "values and up to the last 127 tokens in the activation dtype, counted)",
}


def transformers_kv_backend(kv_dtype: str) -> str:
    """What stores a KV cache of the canonical dtype ``kv_dtype`` in transformers, beside its default DynamicCache
    (activation dtype): the QuantizedCache backend, read from transformers' cache_utils.py (above)."""
    return _TRANSFORMERS_KV_BACKEND.get(kv_dtype, "a QuantizedCache backend")


VLLM = EngineProfile(
    name="vllm", mla_mode="latent", window_extra=-1, block_size=16, kv_dtype_default="model",
    dsa_indexer_cache="fp8_scaled", dsa_latent_cache="fp8_ds_mla",
    # fp32, fp16: as 'auto' only (below); int8 left CacheDType: its 8-bit integer cache is int8_per_token_head, with a
    # float32 scale per token and KV head (formulas/kv_cache.py eq. 5); fp8_per_token_head likewise
    kv_dtypes=("bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head"),
    kv_dtypes_source="vllm/config/cache.py:39-58 CacheDType = Literal['auto', 'float16', 'bfloat16', 'fp8', "
                     "'fp8_e4m3', 'fp8_e5m2', 'fp8_inc', 'fp8_ds_mla', 'nvfp4_ds_mla', 'turboquant_*', "
                     "'int4_per_token_head', 'int8_per_token_head', 'fp8_per_token_head', 'nvfp4', 'nvfp4_4over6'] "
                     "@002f10e0 ('auto' = the model dtype; no plain 'int8')",
    kv_dtypes_why="vllm/config/cache.py:39-58 CacheDType @002f10e0 has no plain int8: the 8-bit integer cache is "
                  "int8_per_token_head (a float32 scale per token and KV head, vllm/v1/kv_cache_interface.py "
                  "AttentionSpec.page_size_bytes @001cabc1)",
    # fp32: no CacheDType names it (nor at vllm-project/vllm@002f10e0 vllm/config/cache.py, whose list gained
    # 'float16' in vllm#37199, 2026-03-16): only 'auto' on a float32 model stores it. A 16-bit cache of the other
    # 16-bit dtype holds the model's bits read as that dtype, no error raised (vllm#54338: '--kv-cache-dtype float16'
    # on a bfloat16 model gives nonsense, and bfloat16 on a float16 model; csrc/attention/dtype_fp8.cuh
    # get_fp8_kv_cache_data_type maps 'auto', 'float16' and 'bfloat16' alike): refused, not sized
    kv_dtypes_model_only=("fp32", "fp16", "bf16"),
    kv_dtypes_model_only_why="vLLM's CacheDType has no float32 and, before vllm#37199, no float16: 'auto' stores "
                             "the model's own type; a 16-bit cache of the other 16-bit type reads the model's bits as "
                             "that type, no error raised (vllm#54338)",
    description="vLLM: loads weights, profiles a dummy batch of max_num_batched_tokens, then pre-allocates KV blocks "
                "to fill gpu_memory_utilization x GPU memory; MLA caches the latent; paged blocks of 16 tokens.",
    source="vLLM docs 'Engine arguments' (gpu_memory_utilization 0.9, block_size 16); "
           "vllm/v1/kv_cache_interface.py (MLAAttentionSpec, SlidingWindowSpec); Kwon et al. 2023 (PagedAttention)",
    state_dtypes=("model", "model"),
    state_source="vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator (conv_kernel - 1 columns), "
                 "MambaStateDtypeCalculator._mamba_state_dtype (mamba_cache_dtype / mamba_ssm_cache_dtype 'auto' = "
                 "model dtype); vllm/v1/kv_cache_interface.py MambaSpec.page_size_bytes (one page per request and "
                 "layer); vllm/model_executor/models/config.py NemotronHForCausalLMConfig (fp32 SSM state)",
)
LLAMACPP = EngineProfile(
    name="llamacpp", mla_mode="latent", window_extra=0, block_size=None, kv_dtype_default="fp16",
    kv_dtypes=("fp32", "fp16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"),
    kv_dtypes_source="llama.cpp common/arg.cpp kv_cache_types {F32, F16, BF16, Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0, "
                     "Q5_1}; kv_cache_type_from_str throws 'Unsupported cache type' on any other -ctk/-ctv",
    kv_dtype_auto_why="llama.cpp has no 'auto' cache type (common/arg.cpp:304-322 kv_cache_types); its default "
                      "-ctk/-ctv, common/common.h:589-590 cache_type_k/v = GGML_TYPE_F16 (ggml-org/llama.cpp@0c1e57098)",
    description="llama.cpp: GGUF weights (token embeddings stay in host memory; -ngl layers offloaded), a KV "
                "cache of n_ctx cells (f16 by default; one stream per sequence, or one unified buffer with -kvu), "
                "compute buffers sized for n_ubatch tokens.",
    source="llama.cpp common/common.h (cache_type_k/v = f16, n_ubatch = 512), src/llama-model.cpp (input layer on "
           "CPU), src/llama-kv-cache.cpp",
    state_dtypes=("fp32", "fp32"),
    state_source="llama.cpp src/llama-model.cpp create_memory (r and s GGML_TYPE_F32, mem_size = max(1, n_seq_max)); "
                 "src/llama-hparams.cpp n_embd_r L127-142 ((d_conv - 1) x conv channels), n_embd_s L144-152 "
                 "(d_state x d_inner); src/llama-memory-recurrent.cpp L101-103 (one row per sequence slot)",
)
SGLANG = EngineProfile(
    name="sglang", mla_mode="latent", window_extra=-1, block_size=1, kv_dtype_default="model",
    dsa_indexer_cache="fp8_scaled", dsa_latent_cache="fp8_ds_mla",  # on CUDA below 10.0: serving_profile
    # recurrent state (MambaPool): conv_kernel - 1 columns in bf16 (CONV_DTYPE), the SSM / delta-rule state in
    # float32 unless the config's mamba_ssm_dtype or SGLANG_MAMBA_SSM_DTYPE says otherwise
    conv_state_window=0, state_dtypes=("bf16", "fp32"),
    state_source="SGLang 0.5.23 sglang/srt/configs/mamba_utils.py:47-125 (mamba2_state_dtype: conv bf16, SSM "
                 "float32 unless mamba_ssm_dtype / SGLANG_MAMBA_SSM_DTYPE; BaseLinearStateParams.mamba_cache_per_req), "
                 ":225, :276 (conv state [conv_dim, conv_kernel - 1])",
    # --kv-cache-dtype's choices (python/sglang/srt/server_args.py ServerArgs.kv_cache_dtype @001067ff): auto,
    # fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16, nvfp4, fp4_mx_block16, fp4_e2m1 -- argparse refuses any other (no
    # plain fp8, no int8, no float16 / float32). ModelRunner.configure_kv_cache_dtype (model_executor/model_runner.py):
    # auto = the model dtype (float8_e4m3fn where the checkpoint's quant config says kv_cache_quant_algo FP8),
    # bf16/bfloat16 = torch.bfloat16 whatever the model, fp8_e4m3 = float8_e4m3fn, fp8_e5m2 = float8_e5m2; so fp16 and
    # fp32 are stored only as 'auto' on a model of that dtype. The block-scaled FP4/MXFP8 recipes are not modelled.
    kv_dtypes=("bf16", "fp8_e4m3", "fp8_e5m2"),
    kv_dtypes_source="SGLang python/sglang/srt/server_args.py ServerArgs.kv_cache_dtype choices @001067ff (auto = "
                     "the model dtype, bf16/bfloat16, fp8_e4m3, fp8_e5m2; mxfp8, nvfp4, fp4_mx_block16, fp4_e2m1 not "
                     "modelled)",
    kv_dtypes_why="SGLang's --kv-cache-dtype choices (server_args.py @001067ff) are auto, bf16, fp8_e4m3, fp8_e5m2 "
                  "and FP4/MXFP8 recipes: no plain fp8 (give fp8_e4m3), no int8",
    kv_dtypes_model_only=("fp32", "fp16"),
    kv_dtypes_model_only_why="SGLang's --kv-cache-dtype has no float16 or float32: 'auto' stores the model's own "
                             "type (model_runner.py configure_kv_cache_dtype)",
    description="SGLang: loads weights, then fills mem_fraction_static of the memory free before loading with a "
                "token pool (max_total_num_tokens); the rest (1 - mem_fraction_static) is left for activations and "
                "CUDA graphs; finished requests stay in the pool as a radix (prefix) cache, evicted as needed.",
    source="SGLang 0.5.23 (PyPI wheel) sglang/srt/arg_groups/memory_hook.py, mem_cache/kv_cache_configurator.py, "
           "model_executor/pool_configurator.py (line numbers in estimate/inference/sglang.py)",
)
PROFILES = {p.name: p for p in (TRANSFORMERS, VLLM, LLAMACPP, SGLANG)}


# SGLang's layout of a DSA model's fp8_e4m3 latent (formulas/kv_cache.py eq. 7) follows the attention backend the
# device gets, not the dtype alone (sglang 0.5.23 PyPI wheel): mem_cache/kv_cache_configurator.py:3412-3475
# ``calculate_mla_kv_cache_dim`` gives the DSATokenToKVPool (mem_cache/memory_pool.py:5279-5323) a row of kv_lora_rank
# + kv_lora_rank // 128 * 4 + qk_rope_head_dim * 2 (bf16 ``rope_storage_dtype``, :5282) = 656 B for a
# float8_e4m3fn cache (:3464-3473), but the raw kv_lora_rank + qk_rope_head_dim row when a DSA backend is trtllm
# (:3425-3440) or, on ROCm, tilelang / triton / aiter (:3442-3448); MLATokenToKVPool stores that row per token and
# layer (memory_pool.py:4786-4796, buffers :4863-4868). Unless given, the backends are trtllm on compute capability
# >= 10 and flashmla_kv below it (arg_groups/overrides.py:714-720), triton on ROCm (:709-713).
SGLANG_DSA_LATENT_SOURCE = ("sglang 0.5.23 mem_cache/kv_cache_configurator.py:3412-3475 calculate_mla_kv_cache_dim "
                            "(656-B scaled row for fp8_e4m3, raw row under trtllm or ROCm's kernels), "
                            "arg_groups/overrides.py:709-720 (default DSA backends: trtllm at compute capability >= "
                            "10, flashmla_kv below, triton on ROCm)")


def sglang_dsa_latent_cache(device: str, runtime: str, capability: int | None) -> str:
    """SGLang's ``dsa_latent_cache`` (formulas/kv_cache.py LATENT_CACHE_KINDS) on a device of kind ``device``
    ('gpu', 'cpu'), runtime ``runtime`` and CUDA compute capability ``capability`` (major x 10 + minor; None: not
    known, taken as Hopper's, as estimate/device.py does for vLLM's gate): 'fp8_ds_mla' under the default
    flashmla_kv backend (CUDA below 10.0), 'plain' under trtllm (10.0 and up) or off CUDA (SGLANG_DSA_LATENT_SOURCE).
    """
    if device == "cpu" or runtime != "cuda" or (capability is not None and capability >= 100):
        return "plain"
    return "fp8_ds_mla"


def serving_profile(engine: str, device: str = "gpu", runtime: str = "cuda",
                    capability: int | None = None) -> EngineProfile:
    """The profile ``engine`` serves with on the given device (the estimate's one lookup): ``PROFILES[engine]``,
    SGLang's with the DSA latent layout of that device (``sglang_dsa_latent_cache``)."""
    profile = PROFILES[engine]
    if engine != "sglang":
        return profile
    return replace(profile, dsa_latent_cache=sglang_dsa_latent_cache(device, runtime, capability))


# -- SGLang's per-model, per-device defaults that change what is sized (sglang 0.5.23 PyPI wheel) --------------------
# SGLang's ``--kv-cache-dtype auto`` is the model dtype (mem_cache/kv_cache_dtype.py:49-59 configure_kv_cache_dtype)
# except where its own code picks FP8:
# (a) a DeepSeek DSA model (configs/model_config.py:191-211 is_deepseek_dsa: a DSA architecture with index_topk; here
#     an MLA model with a lightning indexer) on a CUDA or ROCm GPU (arg_groups/model_hook.py:301-343 runs the pass):
#     arg_groups/overrides.py:532-536 ``_dsa_kv_cache_dtype_default`` takes fp8_e4m3 at compute capability major >= 10
#     (torch.cuda.get_device_capability, :524) unless the config has learnable attention sinks, bfloat16 below. ROCm's
#     torch reports major 9 on MI300 / MI355 (gfx94x / gfx950): bfloat16.
# (b) a checkpoint whose quantization config says kv_cache_quant_algo FP8 (kv_cache_dtype.py:50-57: float8_e4m3fn;
#     read by layers/quantization/modelopt_quant.py:478-499 from the flat config.json form, where a kv_cache_scheme
#     of type float, 8 bits means FP8, or the nested hf_quant_config.json 'quantization' section; fp8.py:366-367).
# DeepSeek-V4, MiniMax-M3 and Muse Spark also default to fp8_e4m3 (overrides.py:892-911, model_overrides/
# minimax_m3.py:116-117, overrides.py:318-320): no reader here builds those models.
SGLANG_DSA_KV_AUTO_SOURCE = ("sglang 0.5.23 arg_groups/overrides.py:491-546 _dsa_kv_cache_dtype_default: auto -> "
                             "fp8_e4m3 for a DeepSeek DSA model at compute capability major >= 10 without learnable "
                             "attention sinks, bfloat16 below (run on CUDA and ROCm GPUs, model_hook.py:301-343)")
SGLANG_CHECKPOINT_KV_SOURCE = ("sglang 0.5.23 mem_cache/kv_cache_dtype.py:49-57 configure_kv_cache_dtype: auto -> "
                               "float8_e4m3fn where the quant config's kv_cache_quant_algo is FP8 (layers/quantization/"
                               "modelopt_quant.py:478-499, fp8.py:366-367)")
# DeepSeek's DeepseekV3ForCausalLM (model_type deepseek_v3; Kimi-K2's kimi_k2) without DSA gets attention backend
# trtllm_mla on sm100 (compute capability major 10: utils/common.py:309-313 is_sm100_supported) unless one is given
# (arg_groups/model_overrides/deepseek_v2.py:177-187)
SGLANG_TRTLLM_MLA_MODEL_TYPES = ("deepseek_v3", "kimi_k2")
# GPT-OSS (GptOssForCausalLM, model_type gpt_oss) gets attention backend trtllm_mha on sm100 unless one is given
# (sglang 0.5.23 arg_groups/model_overrides/gpt_oss.py:29-31), whose page_size is 16, 32, 64 or 128 (else 64:
# arg_groups/overrides.py:1174-1187)
SGLANG_TRTLLM_MHA_MODEL_TYPES = ("gpt_oss",)


def _is_dsa(spec: ModelSpec) -> bool:
    return spec.mla is not None and spec.mla.index_head_dim > 0


def _cuda_major(device: str, runtime: str, capability: int | None) -> int | None:
    """The CUDA compute capability's major (None: not a CUDA GPU, or not known)."""
    if device != "gpu" or runtime != "cuda" or capability is None:
        return None
    return capability // 10


def _sglang_trtllm_mla(spec: ModelSpec, device: str, runtime: str, capability: int | None) -> bool:
    """SGLang picks trtllm_mla for this model on this device (SGLANG_TRTLLM_MLA_MODEL_TYPES)."""
    return (spec.mla is not None and not _is_dsa(spec) and spec.model_type in SGLANG_TRTLLM_MLA_MODEL_TYPES
            and _cuda_major(device, runtime, capability) == 10)


def checkpoint_kv_fp8(quant: dict[str, Any]) -> bool:
    """The checkpoint's quantization config names an FP8 KV cache the way SGLang reads it
    (SGLANG_CHECKPOINT_KV_SOURCE): the nested hf_quant_config.json 'quantization' section's kv_cache_quant_algo, or
    the flat form's (ModelOpt: a quant_algo key) kv_cache_scheme {type float, num_bits 8} or kv_cache_quant_algo."""
    nested = quant.get("quantization")
    q = nested if isinstance(nested, dict) else quant
    scheme = q.get("kv_cache_scheme")
    if "quant_algo" in q and nested is None and isinstance(scheme, dict):
        return scheme.get("type") == "float" and scheme.get("num_bits") == 8
    algo = q.get("kv_cache_quant_algo")
    return isinstance(algo, str) and algo.upper() == "FP8"


def sglang_auto_kv_dtype(spec: ModelSpec, device: str, runtime: str, capability: int | None) -> tuple[str, str] | None:
    """(dtype, why) where SGLang's own ``--kv-cache-dtype auto`` (its default) is not the model dtype for ``spec`` on
    the device (kind ``device``, runtime ``runtime``, CUDA compute capability ``capability``, None: not known, sized
    as on Hopper as for SGLang's DSA row); None where it is the model dtype."""
    if _is_dsa(spec) and capability is not None and (_cuda_major(device, runtime, capability) or 0) >= 10 \
            and not spec.attention_sinks:
        return "fp8_e4m3", (f"SGLang's default for a DeepSeek DSA model at compute capability {capability // 10}."
                            f"{capability % 10} ({SGLANG_DSA_KV_AUTO_SOURCE})")
    if checkpoint_kv_fp8(spec.quantization_config):
        return "fp8_e4m3", f"the checkpoint's quantization config says kv_cache_quant_algo FP8 ({SGLANG_CHECKPOINT_KV_SOURCE})"
    return None


def sglang_kv_dtype_refusal(spec: ModelSpec, kv_dtype: str, device: str, runtime: str,
                            capability: int | None) -> tuple[str, bool] | None:
    """(why, by_device) where SGLang refuses to start with KV cache dtype ``kv_dtype`` (canonical name) for ``spec`` on
    the device, else None: fp8_e5m2 on a DeepSeek DSA model on any CUDA or ROCm GPU (overrides.py:539-544 asserts
    bfloat16 or fp8_e4m3; by_device False) and on DeepseekV3ForCausalLM under trtllm_mla, its default on compute
    capability 10.x only (overrides.py:1204-1217: fp8_e4m3, bf16 or auto; by_device True)."""
    if kv_dtype != "fp8_e5m2":
        return None
    if _is_dsa(spec) and device == "gpu" and runtime in ("cuda", "rocm"):
        return (f"SGLang refuses an fp8_e5m2 KV cache for {spec.name}, a DeepSeek DSA model: its DSA KV dtype must be "
                "bfloat16 or fp8_e4m3 (sglang 0.5.23 arg_groups/overrides.py:539-544); give kv_dtype fp8_e4m3, bf16 "
                "or auto"), False
    if _sglang_trtllm_mla(spec, device, runtime, capability):
        return (f"SGLang refuses an fp8_e5m2 KV cache for {spec.name} on this compute capability 10.x GPU: it serves "
                "DeepseekV3ForCausalLM there with the trtllm_mla backend (sglang 0.5.23 arg_groups/model_overrides/"
                "deepseek_v2.py:177-187), which takes kv-cache-dtype fp8_e4m3, bf16 or auto only (arg_groups/"
                "overrides.py:1204-1217); give kv_dtype fp8_e4m3, bf16 or auto"), True
    return None


def sglang_page_size(spec: ModelSpec, device: str, runtime: str, capability: int | None) -> tuple[int, str]:
    """(page_size, why): the KV page SGLang forces for ``spec`` on the device, else its default 1 on CUDA
    (arg_groups/overrides.py:1341-1363 _page_size_default). Each request holds whole pages (utils/common.py:4859-4861
    get_num_new_pages: ceil(seq_len / page_size)); the pool is whole pages (pool_configurator.py:646, 652)."""
    if _is_dsa(spec) and device == "gpu" and runtime == "cuda":
        return 64, ("SGLang sets page_size 64 x index_kpool (1: the config has none) for a DeepSeek DSA model on "
                    "CUDA (sglang 0.5.23 arg_groups/model_overrides/deepseek_v2.py:161-173; DSATokenToKVPool asserts "
                    "64, mem_cache/memory_pool.py:5370-5374)")
    if _sglang_trtllm_mla(spec, device, runtime, capability):
        return 64, ("SGLang's default trtllm_mla backend on compute capability 10.x (arg_groups/model_overrides/"
                    "deepseek_v2.py:177-187) takes page_size 32 or 64 and sets 64 (arg_groups/overrides.py:1155-1163)")
    if spec.model_type in SGLANG_TRTLLM_MHA_MODEL_TYPES and _cuda_major(device, runtime, capability) == 10:
        return 64, ("SGLang's default trtllm_mha backend for GPT-OSS on compute capability 10.x (arg_groups/"
                    "model_overrides/gpt_oss.py:29-31, is_sm100: utils/common.py:309-313) takes page_size 16, 32, "
                    "64 or 128 and sets 64 in place of the default 1 (arg_groups/overrides.py:1174-1187, "
                    "_mla_backend_page_constraints)")
    return 1, "SGLang's default page_size on CUDA (arg_groups/overrides.py:1341-1363 _page_size_default)"


# -- host time between decode steps, per engine version ----------------------------------------------------------
# A serving engine's host (CPU) work for one decode step -- scheduling, input preparation, sampling, output
# processing -- either runs between the device's steps (serial: the device waits, eq. 7's fixed term) or overlaps the
# device's previous step (overlapped: the step takes max(device, host), formulas/speed.py eq. 14). Which one, and how
# long, depends on the engine's version: one table, read by estimate_speed for every caller (fit, recommend, plan,
# the web, and the validation rows with their own stated version). ``seconds`` None: no published measurement
# establishes it; the estimate then names the omission and warns.
@dataclass(frozen=True)
class StepHost:
    engine: str
    versions: str  # the releases this row covers, as the assumption states them
    first: tuple[int, int]  # (major, minor), inclusive
    until: tuple[int, int] | None  # exclusive; None: up to the current release
    mode: str  # "serial" or "overlapped"
    seconds: float | None  # host seconds per decode step; None: not established
    source: str
    # where ``seconds`` is None: the host seconds the decode range's slow end takes, composed in the row's ``mode``
    # (``HOST_RANGE_STAND_IN``); None: no measured figure of the same host code to bound it with
    range_seconds: float | None = None

    @property
    def name(self) -> str:
        return f"{self.engine}_host_seconds_per_step"

    @property
    def established(self) -> bool:
        return self.seconds is not None


# vLLM 0.8-0.13's host step (V1, synchronous scheduling) has no published measurement: no small-model row of those
# releases states its release (review40 D8; searched: vLLM / SGLang / tenstorrent / gpustack / kvcached issues and
# benchmark tables, the Hazy Research and Mirage low-latency comparisons: none states a 0.8-0.13 release beside a
# <= 4B model at one or a few streams). Left out of the expected value (0 s, warned), a small model's step is its
# device step alone, shorter than vLLM >= 0.14's host floor (eq. 14: max(device, 2.39 ms)), so a newer release is
# estimated several times slower than an older one (Qwen3-0.6B, one stream on one H100: 1,277 tokens/s on 0.13, 418
# on 0.14) -- an inversion of the missing measurement, not of the engines. The estimate states it (speed_layout
# ``host_range_note``) and its range holds the newer answer: the range's slow end takes the one measured host step of
# the V1 engine's host code (efficiency.VLLM_V1_HOST_STEP_SECONDS, VS07 on 0.19.0) in the release's own composition
# (serial, eq. 7: device + host; overlapped with --async-scheduling, eq. 14). A bound, not an estimate: VS17-VS20
# (Qwen3-8B on 0.11.0) put 0.11.0's serial host step below it at 8B (``VLLM_ASYNC_OPT_IN``).
HOST_RANGE_STAND_IN = E.VLLM_V1_HOST_STEP_SECONDS

STEP_HOST: tuple[StepHost, ...] = (
    StepHost("vllm", "vLLM < 0.6 (V0 engine)", (0, 0), (0, 6), "serial", E.VLLM_V0_STEP_SECONDS.expected,
             "V0: scheduling, input preparation, sampling and output processing run between decode steps; "
             + E.VLLM_V0_STEP_SECONDS.source),
    StepHost("vllm", "vLLM 0.6-0.7 (V0 engine, asynchronous output processing)", (0, 6), (0, 8), "serial",
             E.VLLM_V06_STEP_SECONDS.expected,
             "vLLM v0.6.0 (blog.vllm.ai 2024-09-05) overlapped output processing, scheduling stayed serial "
             "(EngineArgs num_scheduler_steps = 1, vllm/engine/arg_utils.py); " + E.VLLM_V06_STEP_SECONDS.source),
    StepHost("vllm", "vLLM 0.8-0.13 (V1 engine, synchronous scheduling)", (0, 8), (0, 14), "serial", None,
             "V1 is the default since 0.8.0 (vllm-project/vllm#13726); EngineCore.step schedules, executes and "
             "updates one step after the other (vllm 0.11.0 vllm/v1/engine/core.py:272-291, 0.13.0 :336-362; "
             "async_scheduling: bool = False, vllm/config/scheduler.py:133); its rows in validation/ (VS15-VS20) are "
             "device-bound, where a host term cannot be told apart from the bandwidth share, and they refute the "
             "2.39 ms measured on 0.19.0 as this step's (VLLM_ASYNC_OPT_IN); the decode range's slow end takes it "
             "(HOST_RANGE_STAND_IN)", HOST_RANGE_STAND_IN.expected),
    StepHost("vllm", "vLLM >= 0.14 (V1 engine, asynchronous scheduling)", (0, 14), None, "overlapped",
             E.VLLM_V1_HOST_STEP_SECONDS.expected,
             "async scheduling by default since 0.14.0 (vllm/config/scheduler.py:133, vllm/config/vllm.py:588-628): "
             "step n + 1 is scheduled while the device runs step n (vllm 0.19.1 vllm/v1/engine/core.py:185, 421 "
             "step_with_batch_queue; vllm/v1/executor/uniproc_executor.py:64-65), so a step takes max(device, "
             "host); " + E.VLLM_V1_HOST_STEP_SECONDS.source),
    StepHost("sglang", "SGLang (overlap scheduler)", (0, 0), None, "overlapped", None,
             "the overlap scheduler is on by default (sglang 0.5.23 srt/arg_groups/fields/schedule.py:193-199 "
             "disable_overlap_schedule = False; srt/managers/scheduler.py:500-502, 2061 event_loop_overlap "
             "'overlaps the CPU processing and GPU computation'); the SGLang rows in validation/ (SG01-SG07, "
             "SS01-SS09) do not separate a host step from the bandwidth share"),
)
# vLLM 0.10-0.13 with ``--async-scheduling`` given (specs/workload.py ``async_scheduling``): the opt-in of the
# asynchronous scheduling that 0.14 made the default. vLLM 0.10.0 added it (vllm/config.py:2358 ``async_scheduling:
# bool = False``, vllm/engine/arg_utils.py:821 the flag; vLLM 0.9.2 has neither), 0.11.0 keeps it opt-in
# (vllm/config/scheduler.py:138, arg_utils.py:915). Without it EngineCore.step runs schedule -> execute ->
# update_from_output one after the other (0.11.0 vllm/v1/engine/core.py:272-291, the executor's
# max_concurrent_batches 1: v1/executor/abstract.py:116-117, multiproc_executor.py:330-333): the host work of a step
# adds to the device's (eq. 7, the "serial" mode of the release's STEP_HOST row). Given, the scheduler is the
# AsyncScheduler (config/scheduler.py:229-231) and the executor keeps max_concurrent_batches = 2
# (multiproc_executor.py:330-333), so EngineCore.step_with_batch_queue (core.py:166-167, 300-352) schedules step n + 1
# while the device runs step n: a step takes max(device, host) (eq. 14). The flag changes how the host step composes
# with the device's, not how long the release's host code takes: the host seconds are the release's own row's
# (``seconds`` of the 0.8-0.13 row of STEP_HOST, the one home of that figure), so for any host time h >= 0 the
# flagged step max(device, h) is at most the unflagged device + h -- the flag never makes a step slower. The figure
# calibrated on vLLM 0.19.0 (efficiency.VLLM_V1_HOST_STEP_SECONDS, 2.39 ms at VS07: five sequences with arriving
# prefills on 0.19.0's host code) is not that row's: added serially to the 0.11.0 H100 rows it is refuted by them
# (VS17, one Qwen3-8B sequence in 7.22 ms: the 15.2 GB it streams would need 0.94 of the H100's 3.35 TB/s in the
# 4.83 ms left, above the calibrated serving share's 0.76 high end, SERVING_DECODE_BANDWIDTH; VS18-VS20 move from
# +1..+4 % to -22..-24 %), so the 0.10-0.13 host step stays not established and the flag's row says so.
VLLM_ASYNC_OPT_IN = ((0, 10), (0, 14))  # the releases where --async-scheduling is an opt-in (0.14: the default)


def _async_opt_in(row: StepHost) -> StepHost:
    """``row`` (the release's own host-work rule) with its host step overlapped: --async-scheduling given on a
    release where it is an opt-in (``VLLM_ASYNC_OPT_IN``). The seconds stay the row's own."""
    return replace(
        row, versions="vLLM 0.10-0.13 with --async-scheduling (V1 engine)", mode="overlapped",
        source="--async-scheduling given (vllm 0.10.0 vllm/config.py:2358, engine/arg_utils.py:821; 0.11.0 "
        "config/scheduler.py:138, 229-231 AsyncScheduler): step n + 1 is scheduled while the device runs step n "
        "(0.11.0 v1/engine/core.py:166-167, 300-352 step_with_batch_queue; v1/executor/multiproc_executor.py:330-333 "
        "max_concurrent_batches 2), so a step takes max(device, host) in place of device + host (core.py:272-291 "
        "step, without it); the host step is the release's own (" + row.versions + "): "
        + (f"{row.seconds} s" if row.established else "not established; the 2.39 ms measured on vLLM 0.19.0 "
           "(VS07) is refuted as 0.11.0's serial host step by VS17-VS20 (estimate/engines.py VLLM_ASYNC_OPT_IN)"))


# Releases whose one-token products on Hopper stream at the SMs' limit (formulas/speed.py eq. 12; beta per
# architecture: efficiency.SERVING_STREAM_BYTES_PER_SM_CYCLE). A property of the kernels a release's PyTorch / cuBLAS
# runs, so established per release where a published row shows it: vLLM 0.8-0.13 (gpustack's vLLM 0.11.0 H100 SXM
# rows VS17-VS20) and SGLang < 0.5 (the Qwen3 page's SGLang 0.4.6.post1 H20 rows SG01-SG07). Later releases' rows
# stream faster through the same SMs (vLLM 0.21 VS01, SGLang 0.5.3 SS09, SGLang 0.5.13 on the H20), and vLLM < 0.8
# has no Hopper row: no limit there, their DRAM share alone.
STREAM_LIMITED: tuple[tuple[str, tuple[int, int], tuple[int, int]], ...] = (
    ("vllm", (0, 8), (0, 14)),
    ("sglang", (0, 0), (0, 5)),
)


def serving_stream_cap(engine: str | None, version: str | None, device_kind: str, architecture: str,
                       sm_cycles_per_second: float | None) -> tuple[float, E.Factor] | None:
    """The bytes/s a stream-limited release of a serving engine (``STREAM_LIMITED``) streams in its decode products
    on a GPU of an architecture with a measured figure: N_SM f beta (formulas/speed.py eq. 12, beta =
    efficiency.SERVING_STREAM_BYTES_PER_SM_CYCLE), with the factor; None for other engines, releases or
    architectures, or a device without SM count and FP32 lanes."""
    if engine is None or device_kind != "gpu" or not sm_cycles_per_second:
        return None
    beta = E.SERVING_STREAM_BYTES_PER_SM_CYCLE.get(architecture)
    if beta is None or not any(e == engine for e, _, _ in STREAM_LIMITED):
        return None
    v = release(engine, version)
    if not any(e == engine and first <= v < until for e, first, until in STREAM_LIMITED):
        return None
    return sm_streaming_bandwidth(sm_cycles_per_second, beta.expected), beta


# The one home of the newest release llmsizer has data for, per engine: the newest engine_version of the validation
# rows (validation/vllm_serving_tpot.csv: vLLM 0.23.0, VS rows; validation/sglang_serving_tpot.csv: SGLang 0.5,
# SS rows; tests/test_engine_versions.py re-derives it from the files). It is the release assumed when none is given
# (the memory profiles follow the code of vLLM 0.19.1 and SGLang 0.5.23, whose rules the rows up to it share); a
# newer release is accepted with the newest rule and a warning (``newer_release_note``).
CURRENT_VERSION = {"vllm": "0.23", "sglang": "0.5"}

# The first vLLM release whose start-up line "GPU KV cache size: N tokens" is int(max_concurrency x max_model_len)
# (formulas/kv_groups.py eq. 6) rather than num_blocks // groups x the smallest block size (eq. 5). Bounded from
# both sides, the merge commit itself not found (no vLLM history could be fetched here, its snapshot being over the
# size limit): vLLM 0.19.0 prints eq. 5 (vllm-project/vllm#40691, 2026-04-23: "GPU KV cache size: 290,864 tokens"
# beside "Maximum concurrency for 32,768 tokens per request: 33.04x" for Qwen3.5-27B, kv_cache_utils.py:1319); on
# main by 2026-05-10 the line is already the group-aware one (vllm-project/vllm#42206, merged: "The startup log
# already reports the correct group-aware KV cache capacity for hybrid models", adding kv_cache_size_tokens =
# int(max_concurrency x max_model_len) to cache_config_info), after the 0.20 release line (0.20.2, a patch of the
# 0.20 branch, shipped the same day), so 0.21.0 is the first release certain to carry it; vLLM 0.24.0 prints it
# (club-3090#652: "569,878 tokens" beside 4.35x at 131,072, not a multiple of any block size). The code:
# kv_cache_utils.py ``_report_kv_cache_config`` (``num_tokens = int(max_concurrency * max_model_len)``), later
# ``get_kv_cache_capacity`` / ``update_kv_cache_capacity``. 0.20.x is taken as the older rule (unpinned).
VLLM_KV_SIZE_LOG_CONCURRENCY_SINCE = (0, 21)


def newer_release_note(engine: str, version: str | None) -> str | None:
    """A warning when ``version`` of ``engine`` is newer than ``CURRENT_VERSION`` (no data for it: the newest rule
    is applied); None for a known release, no version, or an engine without releases here."""
    newest = CURRENT_VERSION.get(engine)
    if version is None or newest is None or parse_version(version) <= parse_version(newest):
        return None
    name = {"vllm": "vLLM", "sglang": "SGLang"}[engine]
    return (f"{name} {version} is newer than the newest release llmsizer has data for ({name} {newest}): the "
            f"rules of {newest} are applied")


def parse_version(version: str) -> tuple[int, int]:
    """(major, minor) of '0.19', '0.19.1', 'v0.8.5.post1'; InputError for anything else (the syntax is the
    workload field's: specs/workload.py ``parse_engine_version``)."""
    return parse_engine_version(version)


def release(engine: str, version: str | None) -> tuple[int, int]:
    """(major, minor) of the release an estimate of ``engine`` uses: ``version``, or ``CURRENT_VERSION`` when none
    is given (the one home of that default: the host step and the range band's scope both read it)."""
    return parse_version(version if version is not None else CURRENT_VERSION[engine])


def release_patch(engine: str, version: str | None) -> tuple[int, int, int]:
    """(major, minor, patch) of the release an estimate of ``engine`` uses, for a rule that changed inside a minor
    release (vLLM's FlashInfer sampler default, VLLM_FLASHINFER_SAMPLER_RELEASES); as ``release`` otherwise."""
    text = version if version is not None else CURRENT_VERSION[engine]
    return (*parse_version(text), engine_version_patch(text))


def step_host(engine: str, version: str | None = None, async_scheduling: bool = False) -> StepHost | None:
    """The host-work rule of ``engine`` at ``version`` (None: ``CURRENT_VERSION``); None for engines whose decode
    step has no such term here (llama.cpp: its per-layer overhead, eq. 7; transformers). ``async_scheduling``:
    vLLM's --async-scheduling given, which overlaps the release's own host step on 0.10-0.13 (``VLLM_ASYNC_OPT_IN``) and is the
    default from 0.14 on (the same row as without it); ``refuse_async_scheduling`` refuses it before 0.10."""
    if async_scheduling and engine == "vllm":
        refuse_async_scheduling(engine, version)
    rows = [r for r in STEP_HOST if r.engine == engine]
    if not rows:
        if version is not None:
            raise InputError(f"engine_version applies to engine vllm or sglang, not {engine}")
        return None
    v = release(engine, version)
    for r in rows:
        if r.first <= v and (r.until is None or v < r.until):
            opt_in = async_scheduling and engine == "vllm" and VLLM_ASYNC_OPT_IN[0] <= v < VLLM_ASYNC_OPT_IN[1]
            return _async_opt_in(r) if opt_in else r
    raise InputError(f"no {engine} release {version} is known")  # pragma: no cover - the table covers 0.0 onwards

# -- the all-reduce kernel of a tensor-parallel decode step, per engine ---------------------------------------------
# Under tensor parallelism every decoder layer all-reduces its activations twice (Megatron-style row-parallel o_proj and
# down_proj: vllm 0.6.3 (PyPI wheel) vllm/model_executor/layers/linear.py:1084 RowParallelLinear.forward,
# ``tensor_model_parallel_all_reduce`` when reduce_results; models/qwen2.py:69, 126) and the vocabulary-parallel
# embedding once per step (vocab_parallel_embedding.py:406): 2 L + 1 all-reduces of b x hidden activations. vLLM's
# GroupCoordinator.all_reduce (distributed/parallel_state.py:321-357) runs its custom all-reduce when
# ``ca_comm.should_custom_ar``, else NCCL (pynccl). CustomAllreduce (distributed/device_communicators/
# custom_all_reduce.py) is enabled only for world sizes 2, 4, 6, 8 (L48), and for more than two GPUs only when every
# pair is joined by NVLink (is_full_nvlink, L130-136: "not supported on more than two PCIe-only GPUs"), and after a
# P2P test (_can_p2p, L27, L140-145); should_custom_ar (L236-248) takes messages below max_size = 8 MiB (L54) on two
# GPUs or a full NVLink mesh. The kernel (csrc/custom_all_reduce.cuh @036bb68 CustomAllreduce::allreduce,
# REDUCE_CASE): one stage (each GPU reads every peer's buffer) on 2 GPUs, or on a full NVLink mesh below 512 KB (<= 4
# GPUs) / 256 KB (<= 8 GPUs); two stages (reduce-scatter, all-gather) above. SGLang keeps the same rule
# (sgl-project/sglang @263bc85 python/sglang/srt/distributed/device_communicators/custom_all_reduce.py
# should_custom_ar: ``world_size == 2 or full_nvlink``, _MAX_CAR_SIZE = 8192 * 1024; more than two PCIe-only GPUs
# disabled). The rule is vLLM 0.6.3's for every release: vLLM before 0.3.0 (PR #2192, merged 2024-01) had only NCCL,
# and recent releases try further one-shot paths first (torch symmetric memory, FlashInfer; vllm @00d618a
# custom_all_reduce.py, CUSTOM_ALL_REDUCE_MAX_SIZES), not told apart here. Only these two engines are covered; another
# engine's tensor-parallel step keeps eq. (6)'s bandwidth term alone.
CUSTOM_ALLREDUCE_WORLD_SIZES = (2, 4, 6, 8)
# NCCL over PCIe: how many GPUs are taken behind one PCIe switch (efficiency.NCCL_ALLREDUCE_LATENCY_PCIE, measured on 4
# x V100 under one switch); more are taken across two islands (two sockets or switches joined through the CPUs,
# NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS, measured on 8 x A800 as 2 x 4), the conservative figure: the catalog states no
# host topology (sockets, PCIe switches) for a device or an instance, and eight-GPU PCIe servers (8 x L40S, 8 x RTX
# 4090) are commonly built as two sockets of four.
PCIE_ONE_SWITCH_GPUS = 4
CUSTOM_ALLREDUCE_MAX_BYTES = 8192 * 1024
ALLREDUCE_ENGINES = ("vllm", "sglang")
# transformers' tensor parallelism has no all-reduce kernel of its own: its plan's styles call torch.distributed
# (``dist.all_reduce``, a DTensor redistribute: transformers 5.24.0 distributed/tensor_parallel.py:297, :354, :577,
# parallel_utils.py:106), NCCL on CUDA GPUs, whatever the message size (formulas/tensor_parallel.py
# ``transformers_plan_collectives`` lists them)
NCCL_ONLY_ENGINES = ("transformers",)


@dataclass(frozen=True)
class AllReducePath:
    kernel: str  # "custom one-stage", "custom two-stage" or "NCCL"
    latency: E.Factor  # seconds per all-reduce (formulas/speed.py eq. 6's alpha)
    why: str  # the engine's rule that picks the kernel


def tp_allreduce(engine: str | None, tp: int, message_bytes: float, nvlink_mesh: bool | None,
                 peer_to_peer: bool = True, library: str = "NCCL", machines: int = 1,
                 all_reduce: bool = True) -> AllReducePath | None:
    """The kernel ``engine`` runs for one all-reduce of ``message_bytes`` over ``tp`` GPUs and its latency; None for a
    single GPU or an engine not covered. ``nvlink_mesh``: every pair of the GPUs joined directly by NVLink or an
    xGMI mesh (vLLM's is_full_nvlink / is_fully_connected; None: not known, taken as not); ``peer_to_peer``: the
    GPUs can map each other's memory (vLLM's _can_p2p; GeForce RTX 40 cards cannot: a device's ``peer_to_peer``, estimate/device.py). An Infinity Fabric
    mesh (MI300X/MI325X/MI355X boards: device.py ``XGMI_MESH_ARCHITECTURES``, vLLM's ROCm is_fully_connected) counts
    as a mesh; its latencies are the NVIDIA-measured figures, stand-ins (no published ROCm small-message timing).
    ``library``: the collective library the label names, "RCCL" on AMD GPUs (torch.distributed's "nccl" backend is
    RCCL in a ROCm build), where the NCCL latency is that stand-in. ``machines``: the machines the ``tp`` GPUs span;
    past 1 the custom kernel is off (vLLM 0.19.1 distributed/device_communicators/custom_all_reduce.py L90-94: "Custom
    allreduce is disabled because this process group spans across nodes", ``in_the_same_node_as``) and NCCL runs, at
    its in-machine latency here (the network's share is formulas/network.py eq. (13'), speed_layout's).
    ``all_reduce`` False: an all-gather or reduce-scatter the engine runs through NCCL (vLLM's pynccl all_gatherv /
    reduce_scatterv of its expert-parallel exchange, vllm 0.19.1 distributed/device_communicators/cuda_communicator.py
    :352-398, :264-292; SGLang's logits all-gather): no custom kernel, NCCL's path at its all-reduce latency, a
    stand-in (no published small all-gather / reduce-scatter timing; transformers' plan's all-gathers take the same,
    formulas/tensor_parallel.py eq. TP2)."""
    if tp <= 1 or engine not in ALLREDUCE_ENGINES + NCCL_ONLY_ENGINES:
        return None
    mesh = bool(nvlink_mesh)
    where = ("a full NVLink / xGMI mesh" if mesh else "2 GPUs" if tp == 2 else
             f"{tp} GPUs without a full NVLink / xGMI mesh")
    if (all_reduce and engine in ALLREDUCE_ENGINES and tp in CUSTOM_ALLREDUCE_WORLD_SIZES and peer_to_peer and (tp == 2 or mesh)
            and message_bytes < CUSTOM_ALLREDUCE_MAX_BYTES and machines == 1):
        one = tp == 2 or (tp <= 4 and message_bytes < 512 * 1024) or (tp <= 8 and message_bytes < 256 * 1024)
        return AllReducePath(f"custom {'one' if one else 'two'}-stage", E.CUSTOM_ALLREDUCE_LATENCY,
                             f"{engine}'s custom all-reduce on {where}, {message_bytes / 1024:.0f} KB < 8 MiB "
                             "(custom_all_reduce.py should_custom_ar; custom_all_reduce.cuh REDUCE_CASE)")
    reason = ("an all-gather / reduce-scatter: NCCL, the custom kernel is an all-reduce's" if not all_reduce else
              f"the group spans {machines} machines, custom all-reduce off across nodes (L90-94)" if machines > 1 else
              "world size not in 2, 4, 6, 8" if tp not in CUSTOM_ALLREDUCE_WORLD_SIZES else
              "no peer-to-peer access" if not peer_to_peer else
              "more than two GPUs without a full NVLink / xGMI mesh" if not (tp == 2 or mesh) else "message >= 8 MiB")
    # NCCL's latency over the replica's link: the NVLink figure on a full mesh (RCCL on an xGMI one: the same
    # stand-in), else PCIe: behind one switch up to PCIE_ONE_SWITCH_GPUS GPUs, across two islands above (probe20 D7:
    # before, the H100 NVLink figure for every NCCL path; review25 D4: 8 PCIe GPUs took the one-switch figure)
    if mesh:
        latency, over = E.NCCL_ALLREDUCE_LATENCY, "over the NVLink / xGMI mesh"
    elif tp // max(machines, 1) <= PCIE_ONE_SWITCH_GPUS:  # the GPUs of one machine
        latency, over = E.NCCL_ALLREDUCE_LATENCY_PCIE, f"over PCIe behind one switch (up to {PCIE_ONE_SWITCH_GPUS} GPUs)"
    else:
        latency, over = E.NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS, (
            f"over PCIe across two islands (more than {PCIE_ONE_SWITCH_GPUS} GPUs; no host topology in the catalog, "
            "the conservative figure)")
    stand_in = "" if library == "NCCL" else f" ({library}: NCCL's NVIDIA-measured latency a stand-in)"
    if machines > 1:
        over += f" inside each of {machines} machines, plus the network's share (formulas/network.py eq. (13'))"
    if engine in NCCL_ONLY_ENGINES:
        return AllReducePath(library, latency, f"{engine} runs {library} through torch.distributed (distributed/"
                             f"tensor_parallel.py:297, :354, :577; no custom kernel); {over}{stand_in}")
    return AllReducePath(library, latency, f"{engine} falls back to {library}: {reason} (custom_all_reduce.py L48, "
                         f"L130-145, L236-248); {over}{stand_in}")


# SGLang's memory-tier defaults (sglang/srt/arg_groups/memory_hook.py:90-160): for total GPU memory below the bound
# [MiB], (chunked_prefill_size, decode CUDA-graph max_bs at tp < 4, at tp >= 4). The last row is ">= 160 GiB".
SGLANG_TIERS: tuple[tuple[float, int, int, int], ...] = (
    (20 * 1024, 2048, 8, 8),  # T4, 4080
    (35 * 1024, 4096, 48, 160),  # A10, 4090, 5090
    (60 * 1024, 4096, 32, 160),  # A100 40GB, L40
    (90 * 1024, 8192, 256, 512),  # H100, A100 80GB
    (160 * 1024, 8192, 256, 512),  # H20, H200
    (float("inf"), 16384, 512, 512),  # B200, MI300
)
# reserved_mem [MiB] = 512 + 1.5 x max(chunked_prefill_size, 2048) + tp x pp / 8 x 1024 + graphs, >= 10 GiB above
# 60 GiB of GPU memory (memory_hook.py:305-315); graphs = 2 x decode max_bs + 8 per prefill graph size (1.5 GiB with
# MLA) (memory_hook.py:357-390).
SGLANG_RESERVED_FLOOR_MIB = 512
SGLANG_ACTIVATION_MIB_PER_TOKEN = 1.5
SGLANG_MIN_ACTIVATION_TOKENS = 2048
SGLANG_TP_MIB = 1024 / 8
SGLANG_DECODE_GRAPH_MIB_PER_BS = 2
SGLANG_PREFILL_GRAPH_MIB_PER_SIZE = 8
SGLANG_PREFILL_GRAPH_MLA_MIB = 1.5 * 1024
SGLANG_BIG_GPU_MIB = 60 * 1024
SGLANG_BIG_GPU_MIN_RESERVED_MIB = 10 * 1024
# Hybrid (Mamba / Gated DeltaNet) models: the memory left after the weights is split between the per-request
# recurrent-state pool (MambaPool) and the full-attention token pool by --mamba-full-memory-ratio (fallback 0.9,
# SGLang 0.5.23 arg_groups/fields/schedule.py:220-227): mamba budget = rest x ratio / (1 + ratio)
# (mem_cache/kv_cache_configurator.py:3346-3386); the running requests are capped at max_mamba_cache_size // s, s =
# MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (3, :227) + the radix cache's extra-buffer tracking slots (0; 2 with
# the overlap scheduler, 1 without or lazy; s = 1 with the radix cache disabled: :3062-3088, :3135-3150;
# estimate/inference/sglang.py mamba_state_slots, eq. 4b).
SGLANG_MAMBA_FULL_MEMORY_RATIO = 0.9
SGLANG_MAMBA_REQUESTS_RATIO = 3
# Hybrid sliding-window (SWA) models on SGLang's hybrid pool (estimate/inference/sglang.py eq. 3s,
# formulas/swa_pool.py): the SWA pool holds swa_full_tokens_ratio x the full pool's tokens (--swa-full-tokens-ratio,
# fallback 0.8: SGLang 0.5.23 arg_groups/fields/schedule.py:150-162), and a running request's out-of-window SWA slots
# are freed every SGLANG_SWA_EVICTION_INTERVAL decoded tokens (128: environ.py:730).
SGLANG_SWA_FULL_TOKENS_RATIO = 0.8
SGLANG_SWA_EVICTION_INTERVAL = 128
# Before 0.5.8 SGLang gave GPT-OSS the one KV pool on every device: ServerArgs' GptOssForCausalLM branch sets
# ``self.disable_hybrid_swa_memory = True`` unconditionally (sglang 0.5.4.post2 srt/server_args.py:969, 0.5.5.post1
# :1009, 0.5.7 :1214; the PyPI wheels); 0.5.8 sets it only under the trtllm_mha attention backend or speculative
# decoding (srt/server_args.py:1278-1293), and 0.5.10 / 0.5.23 list GptOssForCausalLM among the hybrid SWA
# architectures (configs/model_config.py). By patch release (``release_patch``): [0.0.0, 0.5.8).
SGLANG_GPT_OSS_ONE_POOL_UNTIL = (0, 5, 8)
SGLANG_GPT_OSS_ONE_POOL_SOURCE = ("SGLang before 0.5.8 sets disable_hybrid_swa_memory for GptOssForCausalLM on every "
                                  "device (sglang 0.5.4.post2 srt/server_args.py:969, 0.5.7 :1214; 0.5.8 keeps it "
                                  "only under trtllm_mha or speculative decoding, :1278-1293)")

# vLLM's hybrid allocator: attention blocks grow until one attention page (block x KV bytes per token and layer, on one
# GPU) holds one Mamba state page (this GPU's shard), in multiples of the kernel block alignment (16 tokens); the Mamba
# page is then padded to the attention page (vllm/platforms/interface.py _align_hybrid_block_size, formerly
# vllm/model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config; mamba_cache_mode
# "none": one state page per request and recurrent layer).
VLLM_KERNEL_BLOCK_ALIGNMENT = 16

VLLM_GPU_MEMORY_UTILIZATION = 0.9  # vLLM EngineArgs default (docs: "gpu_memory_utilization ... default 0.9")
# `vllm serve`'s batch defaults (usage context OPENAI_API_SERVER; the LLM class takes the same max_num_seqs), set when
# the user leaves them unset: vllm/engine/arg_utils.py EngineArgs._set_default_args @99d7eb5d (newer releases:
# EngineArgs.get_batch_defaults). A GPU of at least 70 GiB whose name does not contain "a100" gets the large pair,
# every other GPU the small one; then max_num_seqs = min(that, max_num_batched_tokens). SchedulerConfig's own
# DEFAULT_MAX_NUM_SEQS = 128 (vllm/config/scheduler.py:32 @01230b40) is "mainly for convenience when testing" (its
# docstring, :44-49): `vllm serve` never leaves it in force. Read by estimate/inference/vllm.py vllm_batch_defaults.
VLLM_BIG_GPU_BYTES = 70 * GiB
VLLM_MAX_NUM_SEQS_BIG, VLLM_MAX_NUM_BATCHED_TOKENS_BIG = 1024, 8192
VLLM_MAX_NUM_SEQS, VLLM_MAX_NUM_BATCHED_TOKENS = 256, 2048
LLAMACPP_N_UBATCH = 512  # llama.cpp common.h n_ubatch default (physical batch)
LLAMACPP_N_BATCH = 2048  # llama.cpp common/common.h n_batch default ("logical batch size for prompt processing")

# How each continuous-batching engine schedules prompts beside running decodes (formulas/serving_queue.py eqs.
# Q4-Q7, read by estimate/serving_load.py): True where a prefill chunk and the running sequences' decode tokens go
# into one forward (one read of the weights; the step costs its roofline, eq. Q5a), False where a prefill batch runs
# instead of the decode batch (eq. Q5b); with the chunk budget's name and its source.
PREFILL_SCHEDULING: dict[str, tuple[bool, str, str]] = {
    "vllm": (True, "max_num_batched_tokens",
             "vLLM v1 Scheduler.schedule (vllm/v1/core/sched/scheduler.py): 'First, schedule the RUNNING requests' "
             "(one token each), then the WAITING ones' prompt tokens while token_budget = max_num_batched_tokens "
             "lasts (chunked prefill, on by default in v1); all of them in one SchedulerOutput, one forward"),
    "sglang": (False, "chunked_prefill_size",
               "SGLang Scheduler.get_next_batch_to_run (python/sglang/srt/managers/scheduler.py): a new prefill "
               "batch (get_new_batch_prefill, at most chunked_prefill_size tokens) is run first if there is one "
               "('Run prefill first if possible'), else the decode batch; mixing them needs --enable-mixed-chunk "
               "(ServerArgs.enable_mixed_chunk = False, srt/server_args.py)"),
    "llamacpp": (True, "n_batch",
                 "llama.cpp server update_slots (tools/server/server-context.cpp): 'first, add sampled tokens from "
                 "any ongoing sequences', then 'batch any pending prompts without exceeding n_batch' (default 2048, "
                 "common/common.h), one llama_decode of both (split into n_ubatch ubatches)"),
}
# The server's own time per request beside the device (formulas/serving_queue.py eq. Q9's H: HTTP, tokenizing, the
# first token's trip back and its streamed chunk), per HTTP-serving continuous-batching engine, read by
# estimate/serving_load.py. vLLM's is calibrated (efficiency.VLLM_API_SERVER_SECONDS, row SL01); SGLang's HTTP server
# (its tokenizer manager, a Python process beside the scheduler) and llama.cpp's server do the same per-request work
# but no row measures it, so they take the same named default (not measured for them: said in the prefill_under_load
# assumption with its stated range, 0 .. 2 x SL01; llama.cpp's C++ server is likelier near the low end). One default
# for every HTTP-serving engine keeps an engine comparison from favouring one by construction.
API_SERVER_SECONDS: dict[str, float] = {e: E.VLLM_API_SERVER_SECONDS.expected for e in ("vllm", "sglang", "llamacpp")}
API_SERVER_RANGE = (E.VLLM_API_SERVER_SECONDS.low, E.VLLM_API_SERVER_SECONDS.high)  # stated, not calibrated
# The share of H the server's one process does serially (formulas/serving_queue.py eq. Q11: s H queues, (1 - s) H a
# delay), vLLM's calibrated (efficiency.VLLM_API_SERVER_SERIAL_SHARE, row SL23), the same default for every engine
# that takes H's default.
API_SERVER_SERIAL_SHARE: dict[str, float] = {e: E.VLLM_API_SERVER_SERIAL_SHARE.expected for e in API_SERVER_SECONDS}
API_SERVER_SOURCE = {"vllm": "efficiency.VLLM_API_SERVER_SECONDS, calibrated on SL01",
                     "sglang": "efficiency.VLLM_API_SERVER_SECONDS: vLLM's SL01 value as the default, SGLang's HTTP "
                               "server is not measured",
                     "llamacpp": "efficiency.VLLM_API_SERVER_SECONDS: vLLM's SL01 value as the default, llama.cpp's "
                                 "server is not measured"}
# Warn when the prompts' prefill takes at least this share of device time at the requested load (eq. Q7's u): the
# TTFT and per-user rate are then set by other requests' prompts, not by the decode alone. A threshold for a warning,
# not a fitted constant.
PREFILL_SHARE_WARN = 0.5
LLAMACPP_KV_PAD = 256  # llama.cpp pads n_ctx / KV cells to a multiple of 256 (llama-context.cpp, llama-kv-cache.cpp)


# llama.cpp's KV layout for several sequences (-np N): one unified buffer shared by all of them (-kvu) or one stream
# per sequence. common/common.h:575 ``kv_unified = false``; llama-server turns it on only when -np is left at auto
# (common/arg.cpp:1403 server default n_parallel = -1; tools/server/server.cpp:156-161 "n_parallel is set to auto,
# using n_parallel = 4 and kv_unified = true"). llmsizer's concurrency is llama.cpp's -np, which a server for N
# sequences is given (fit --auto prints it), so the default is one stream per sequence.
LLAMACPP_KV_UNIFIED = False
LLAMACPP_KV_UNIFIED_SOURCE = (
    "llama-server -np N keeps common/common.h:575 kv_unified = false (one KV stream per sequence); only -np auto "
    "turns -kvu on (4 slots, tools/server/server.cpp:156-161; common/arg.cpp:1403, 1721-1728), ggml-org/llama.cpp"
    "@0c1e57098; PR #16736 'By default, start the server using 4 slots and unified KV cache'")


@fast_init
@dataclass(frozen=True)
class LlamaCppKV:
    """llama.cpp's KV cells for ``sequences`` sequences (:func:`llamacpp_kv_cells`): ``streams`` buffers of
    ``cells`` cells in each full-attention layer and ``sliding_cells`` in each sliding-window layer."""

    unified: bool
    sequences: int
    streams: int  # n_stream: 1 unified, else n_seq_max (src/llama-kv-cache.cpp:84)
    n_ctx: int  # cells of all streams together, after llama.cpp's rounding
    cells: int  # per stream, full-attention layers (cparams.n_ctx_seq)
    sliding_cells: int  # per stream, sliding-window layers (size_swa)
    window: int  # the model's window (0: none)
    ring: bool = False  # sliding layers keep their own ring-buffer stream (llama.cpp's iSWA cache; not Phi-3)

    @property
    def window_extra(self) -> int:
        """Cells a sliding layer's stream holds beyond the window (formulas/kv_cache.py ``window_extra``)."""
        return self.sliding_cells - self.window

    def stream_tokens(self, tokens_per_sequence: int | None = None) -> int:
        """Cells in use in each stream when every sequence holds ``tokens_per_sequence`` tokens (None: the stream's
        capacity, what memory allocates): a unified stream holds every sequence's tokens, a split one its own."""
        if tokens_per_sequence is None:
            return self.cells
        return min(self.cells, tokens_per_sequence * (self.sequences if self.unified else 1))

    def decode_kv(self, tokens_per_sequence: int) -> tuple[int, int]:
        """(tokens per stream, streams) one decode step of every sequence reads (each cell once): the arguments of
        formulas/kv_cache.kv_cache with ``window_extra``, as memory is sized with ``(stream_tokens(), streams)``."""
        return self.stream_tokens(tokens_per_sequence), self.streams

    @property
    def cross_sequence_attention(self) -> int:
        """Sequences whose cells each query's attention computes over: with one unified stream a query sees the
        whole buffer and the other sequences' cells are masked, not skipped (llama.cpp PR #14363 "cross-sequence
        attention ... which we then simply discard"; ggml-cuda fattn-common.cuh skips only trailing masked tiles);
        1 with a stream per sequence."""
        return self.sequences if self.unified else 1

    def sliding_read(self, ubatch: int, prompt: int, generated: int, flash_attention: bool) -> int:
        """Cells per stream a decode step of every sequence reads in a sliding layer, after ``prompt`` tokens and
        ``generated`` decoded ones: the flash-attention mask scan (``LLAMACPP_FA_KV_TILE``) runs when the step holds
        several streams (one per sequence, no -kvu) and stops at the ring's last in-window tile
        (:func:`llamacpp_sliding_cells_read`); otherwise the stream's cells in use."""
        in_use = self.stream_tokens(prompt + generated)
        if not self.ring:
            return in_use
        if not (flash_attention and not self.unified and self.sequences > 1):
            return min(self.sliding_cells, in_use)
        return llamacpp_sliding_cells_read(self.window, self.sliding_cells, ubatch, prompt, generated, True)


def llamacpp_layer_split(engine: str | None, devices: int) -> bool:
    """Whether a serving answer of ``engine`` on ``devices`` devices is one llama.cpp model split over them (layers,
    or rows with ``-sm row``, by ``-ts`` proportions: estimate/inference/llamacpp_split.py rules (1)-(2), read in
    ggml-org/llama.cpp@0c1e57098 src/llama-model.cpp:1557-1600), not tensor-parallel replicas: llama.cpp runs no
    tensor parallelism, so its answer is one replica of TP 1 over every device. The one home of the rule: ``fit``
    decides its layout by it (several CPUs or Apple chips are replicas instead, device.py ``one_replica_per_device``),
    ``FitResult.layer_split`` reports it on one replica's devices, recommend sizes its candidates by it, the plan reads the fit's and the estimate's verdict takes the fullest
    GPU of a split (its workload's ``gpus``; a workload refuses gpus > 1 with another engine or on a CPU)."""
    return engine == "llamacpp" and devices > 1


# What a llama.cpp split's verdict takes of the GPUs' memory (inference/compose.py ``_check_fit``): one memory for
# every GPU, the fullest GPU against it; llama.cpp's --fit checks each GPU against its own free memory (common/fit.cpp:
# targets = free - margins, per device), as ``fit --auto --free`` does (llamacpp_fit.py ``unequal_free_note``). Said
# in the split's verdict so that an answer for GPUs of unequal free memory is read as what it is.
ONE_MEMORY_SAID = ("one memory for all; for GPUs of unequal free memory, fit --auto --free checks each against its "
                   "own")


def llamacpp_kv_cells(model_type: str, window: int | None, ubatch: int, sequences: int, context: int,
                      unified: bool) -> LlamaCppKV:
    """llama.cpp's KV cells for ``sequences`` sequences of ``context`` tokens (-c = context x sequences, -np =
    sequences), ggml-org/llama.cpp@0c1e57098:

    - n_ctx = pad256(context x sequences) (src/llama-context.cpp:290); unified: n_ctx_seq = n_ctx, one stream;
      else n_ctx_seq = pad256(n_ctx / n_seq) and n_ctx = n_ctx_seq x n_seq (src/llama-context.cpp:292-306), one
      stream per sequence (src/llama-kv-cache.cpp:84 ``n_stream = unified ? 1 : n_seq_max``; K and V tensors of
      kv_size x n_stream cells, :233-234, kv_size = n_ctx_seq from src/llama-model.cpp create_memory);
    - a sliding-window layer's stream: size_swa = pad256(min(n_ctx_seq, n_swa x (unified ? n_seq : 1) + n_ubatch))
      (src/llama-kv-cache-iswa.cpp:69-73; "always padded to 256 for performance", issue #17037). Phi-3 runs without its window in llama.cpp (src/llama-model.cpp
      LLM_ARCH_PHI3: swa_type NONE): its sliding layers hold the full n_ctx_seq.

    Memory allocates ``streams`` x the cells; a decode step reads the cells in use (``decode_kv``), every cell of
    a sliding stream once it is full (out-of-window cells are masked, not skipped)."""
    if sequences < 1 or context < 1 or ubatch < 1:
        raise InputError(f"sequences, context and n_ubatch must be positive, got {sequences}, {context}, {ubatch}")
    pad = LLAMACPP_KV_PAD
    n_ctx = -(-context * sequences // pad) * pad
    if unified:
        per_stream, streams = n_ctx, 1
    else:
        per_stream = -(-(n_ctx // sequences) // pad) * pad
        streams, n_ctx = sequences, per_stream * sequences
    w = window or 0
    if model_type == "phi3" or not w:
        sliding = per_stream
    else:
        sliding = min(per_stream, -(-(w * (sequences if unified else 1) + ubatch) // pad) * pad)
    return LlamaCppKV(unified, sequences, streams, n_ctx, per_stream, sliding, w, ring=bool(w) and model_type != "phi3")


# ggml-cuda's flash attention scans the KQ mask for the end of the last 256-cell tile that holds an unmasked cell and
# stops there ("KV_max", ggml/src/ggml-cuda/fattn-common.cuh:879 at ggml-org/ggml@7b6abb2, the sync of llama.cpp
# b6918: ``if (mask && K->ne[1] % FATTN_KQ_STRIDE == 0 && (Q->ne[1] >= 1024 || Q->ne[3] > 1))``, kernel
# flash_attn_mask_to_KV_max :570-618; fattn-vec.cuh:239, fattn-tile.cuh:851, fattn-mma-f16.cuh:1335 stop at it).
# ``Q->ne[3]`` is the number of KV streams in the step: the scan runs when one step decodes several sequences that each
# have their own stream (no -kvu), never for one sequence nor for one unified stream (fewer than 1024 queries).
LLAMACPP_FA_KV_TILE = 256  # FATTN_KQ_STRIDE (fattn-common.cuh:9)


@functools.lru_cache(maxsize=256)
def _ring_last_cell(window: int, cells: int, ubatch: int, prompt: int, generated: int) -> int:
    """Index + 1 of the last cell a sliding layer's stream holds inside the window after ``prompt`` tokens (in
    ubatches of ``ubatch``) and ``generated`` single decoded tokens of one sequence, by llama.cpp's slot search
    (src/llama-kv-cache.cpp find_slot, ggml-org/llama.cpp@0c1e57098): from the stream's head, wrapping at the end,
    every cell that is empty or whose position is out of the window of the sequence's last position
    (``is_masked_swa(pos_cell, seq_pos_max + 1)``: seq_pos_max + 1 - pos >= n_swa) takes the next token; the search
    restarts at cell 0 when the head lies beyond used + 2 n_tokens; the head moves past the last cell taken
    (apply_ubatch). Bounded: the ring state (positions relative to the last one, the head) repeats within a few
    ubatches, and the loop jumps over whole periods."""
    runs: list[list[int]] = [[0, cells, -1]]  # [first cell, length, first position (-1: empty)], in cell order
    head, last = 0, -1

    def split_at(c: int) -> None:
        for k, (s, n, q) in enumerate(runs):
            if s < c < s + n:
                runs[k:k + 1] = [[s, c - s, q], [c, s + n - c, -1 if q < 0 else q + c - s]]
                return

    def place(p0: int, n: int) -> None:
        nonlocal head, last
        used = sum(r[1] for r in runs if r[2] >= 0)
        h = 0 if head > used + 2 * n or head >= cells else head
        cut = last + 1 - window  # a cell at a position <= cut is out of the window: reusable
        split_at(h)
        first = next(k for k, r in enumerate(runs) if r[0] >= h) if h else 0
        order = [*range(first, len(runs)), *range(first)]
        need, p, end = n, p0, 0
        pieces: dict[int, list[list[int]]] = {}
        for k in order:
            s, m, q = runs[k]
            t = min(need, m if q < 0 else max(0, min(m, cut - q + 1)))
            if t:
                pieces[k] = [[s, t, p]] + ([[s + t, m - t, -1 if q < 0 else q + t]] if m > t else [])
                need, p, end = need - t, p + t, s + t
            if not need:
                break
        if need:
            raise InputError(f"llama.cpp sliding-window stream of {cells} cells cannot take a ubatch of {n} tokens")
        merged: list[list[int]] = []
        for k, r in enumerate(runs):
            for piece in pieces.get(k, [r]):
                prev = merged[-1] if merged else None
                if prev and ((prev[2] < 0 and piece[2] < 0) or (prev[2] >= 0 and prev[2] + prev[1] == piece[2])):
                    prev[1] += piece[1]
                else:
                    merged.append(list(piece))
        runs[:] = merged
        head, last = end, max(last, p0 + n - 1)

    seen: dict[tuple[object, ...], int] = {}
    p = 0
    while p < prompt:
        n = min(ubatch, prompt - p)
        if n == ubatch and p > 0:  # full ubatches repeat the ring; jump over whole periods
            key = (head, *((s, m, -1 if q < 0 else last - q) for s, m, q in runs))
            if key in seen:
                period = p - seen[key]
                skip = (prompt - p) // period * period
                if skip:
                    for r in runs:
                        r[2] += skip if r[2] >= 0 else 0
                    p, last = p + skip, last + skip
                    seen.clear()
                    continue
            seen[key] = p
        place(p, n)
        p += n
    k = 0
    while k < generated:  # decoded tokens, one per step: a run of reusable cells at the head takes them in turn
        t = _sequential_fill(runs, head, last, window, generated - k, cells)
        if t <= 1:
            place(prompt + k, 1)
            k += 1
            continue
        split_at(head)
        split_at(head + t)
        i = next(j for j, r in enumerate(runs) if r[0] == head)
        runs[i][2] = prompt + k
        prev = runs[i - 1] if i else None
        if prev and prev[2] >= 0 and prev[2] + prev[1] == runs[i][2]:
            prev[1] += runs.pop(i)[1]
        head, last, k = head + t, prompt + k + t - 1, k + t
    lo = prompt + generated - window  # positions > lo are inside the window of the last token
    return max(s + m for s, m, q in runs if q >= 0 and q + m - 1 > lo)


def _sequential_fill(runs: list[list[int]], head: int, last: int, window: int, n: int, cells: int) -> int:
    """How many of ``n`` single-token steps take consecutive cells from ``head``: inside one run, cell head + i holds
    position q + i, reusable for step i exactly when q <= last + 1 - window (both sides advance by one), and the
    search keeps starting at the head while head <= used + 2 (find_slot's restart rule)."""
    if head >= cells:
        return 0
    used = sum(r[1] for r in runs if r[2] >= 0)
    if head > used + 2:
        return 0
    s, m, q = next(r for r in runs if r[0] <= head < r[0] + r[1])
    if q >= 0 and q + head - s > last + 1 - window:
        return 0
    room = s + m - head
    t = min(n, room) if q < 0 else min(n, room, used + 2 - head + 1)
    return max(t, 0)


def llamacpp_sliding_cells_read(window: int, cells: int, ubatch: int, prompt: int, generated: int,
                                mask_scan: bool) -> int:
    """Cells a sliding-window layer's flash-attention decode step reads per stream: with the mask scan (several
    streams in the step, ``LLAMACPP_FA_KV_TILE``) up to the end of the tile that holds the ring's last in-window cell
    (:func:`_ring_last_cell`); without it the stream's cells in use, all of them once the ring is full."""
    used = min(cells, prompt + generated)
    if not mask_scan or prompt + generated <= window:
        return used
    tile = LLAMACPP_FA_KV_TILE
    return min(cells, -(-_ring_last_cell(window, cells, ubatch, prompt, generated) // tile) * tile)
