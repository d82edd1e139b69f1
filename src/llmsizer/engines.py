"""Engine profiles: how each serving engine allocates memory, as named, cited constants.

Every number here is a documented parameter, never a hidden factor. A ``Span`` is (low, expected, high)
where the answer depends on driver/allocator behaviour we cannot see from a config.
"""

from __future__ import annotations

from dataclasses import dataclass

from .units import GiB, MiB


@dataclass(frozen=True)
class Span:
    low: int
    expected: int
    high: int
    source: str


# CUDA context + kernel images + cuBLAS/cuDNN handles: memory nvidia-smi shows but torch's allocator does not.
# Other estimators' constants span this range (shared/research/anchors.md): gguf-parser-go 250 MiB,
# Ollama 457 MiB, gpu_poor 650 MB; PyTorch with CUDA lazy module loading (default since CUDA 11.7)
# typically reports 300-600 MiB. Not yet measured by llmsizer on a GPU (see docs/validation.md).
CUDA_CONTEXT = Span(250 * MiB, 500 * MiB, 1 * GiB,
                    "range of other tools' constants (gguf-parser-go 250 MiB, Ollama 457 MiB, gpu_poor 650 MB)")

# Resident memory of a Python process after `import torch, transformers` (no model): measured on the
# llmsizer CI machine (x86_64, torch 2.13.0+cpu, transformers 5.24.0): 242 MiB peak RSS, two runs.
TORCH_HOST_RUNTIME = Span(200 * MiB, 250 * MiB, 500 * MiB,
                          "measured: peak RSS after importing torch 2.13.0 + transformers 5.24.0 = 242 MiB")

# llama.cpp process without a model: a native binary, no Python.
LLAMACPP_HOST_RUNTIME = Span(20 * MiB, 60 * MiB, 150 * MiB,
                             "llama.cpp is a native binary; gguf-parser-go budgets 150 MiB footprint")

# vLLM CUDA-graph capture memory (reported in its log 'Graph capturing finished in N secs, took X GiB').
VLLM_CUDA_GRAPHS = Span(int(0.1 * GiB), int(0.5 * GiB), int(1.5 * GiB),
                        "vLLM startup logs 'Graph capturing ... took 0.1-1.5 GiB' (docs/validation.md); 0 with enforce_eager")


@dataclass(frozen=True)
class EngineProfile:
    name: str
    mla_mode: str  # 'latent' caches (kv_lora_rank + rope) per token; 'expanded' caches full K and V
    window_extra: int  # tokens a sliding layer keeps beyond its window
    block_size: int | None  # paged KV block (None: contiguous)
    kv_dtype_default: str
    description: str
    source: str


TRANSFORMERS = EngineProfile(
    name="transformers", mla_mode="expanded", window_extra=-1, block_size=None, kv_dtype_default="model",
    description="Hugging Face transformers generate(): DynamicCache grows with the sequence; sliding layers keep "
                "window-1 tokens; DeepSeek MLA caches expanded K/V; weights as loaded.",
    source="transformers cache_utils.py (DynamicLayer, DynamicSlidingWindowLayer.update: keeps the last "
           "sliding_window-1 tokens); models/deepseek_v3/modeling_deepseek_v3.py (caches key_states/value_states per head)",
)
VLLM = EngineProfile(
    name="vllm", mla_mode="latent", window_extra=-1, block_size=16, kv_dtype_default="model",
    description="vLLM: loads weights, profiles a dummy batch of max_num_batched_tokens, then pre-allocates KV blocks "
                "to fill gpu_memory_utilization x GPU memory; MLA caches the latent; paged blocks of 16 tokens.",
    source="vLLM docs 'Engine arguments' (gpu_memory_utilization 0.9, block_size 16); "
           "vllm/v1/kv_cache_interface.py (MLAAttentionSpec, SlidingWindowSpec); Kwon et al. 2023 (PagedAttention)",
)
LLAMACPP = EngineProfile(
    name="llamacpp", mla_mode="latent", window_extra=0, block_size=None, kv_dtype_default="fp16",
    description="llama.cpp: GGUF weights (token embeddings stay in host memory; -ngl layers offloaded), one "
                "unified KV cache of n_ctx cells (f16 by default), compute buffers sized for n_ubatch tokens.",
    source="llama.cpp common/common.h (cache_type_k/v = f16, n_ubatch = 512), src/llama-model.cpp (input layer on "
           "CPU), src/llama-kv-cache.cpp",
)
PROFILES = {p.name: p for p in (TRANSFORMERS, VLLM, LLAMACPP)}

VLLM_GPU_MEMORY_UTILIZATION = 0.9  # vLLM EngineArgs default (docs: "gpu_memory_utilization ... default 0.9")
VLLM_MAX_NUM_SEQS = 256  # vLLM scheduler default max_num_seqs (V1 may raise it on large GPUs; set it explicitly)
VLLM_MAX_NUM_BATCHED_TOKENS = 8192  # V1 default chunked-prefill token budget for the OpenAI server on >=70 GiB GPUs
LLAMACPP_N_UBATCH = 512  # llama.cpp common.h n_ubatch default (physical batch)
LLAMACPP_KV_PAD = 256  # llama.cpp pads KV cells to 256 (llama_kv_cache::get_padding with flash attention)
