"""llmsizer: what does this LLM workload need? Memory, time, storage and hardware, with sources.

The public API (no torch/transformers import happens here):

>>> import llmsizer
>>> est = llmsizer.estimate_inference("llama-3.1-8b", context=8192, concurrency=4)
>>> sorted(i.name for i in est.items)[:3]
['activations', 'allocator_cache', 'cuda_context']
"""

from .errors import (
    HubUnavailableError,
    InputError,
    LlmsizerError,
    ModelFileError,
    UnknownNameError,
    UnsupportedArchitectureError,
)
from .formulas.kv_cache import kv_cache
from .formulas.params import count_params
from .formulas.weight_formats import format_names, weight_bytes
from .inference import estimate_inference
from .models import load_model
from .result import Assumption, Estimate, Item
from .reverse import max_concurrency, max_context
from .specs import InferenceWorkload, ModelSpec, TrainingWorkload
from .training import estimate_training, max_micro_batch, max_seq_len

__version__ = "0.1.0"

# Hardware fit/recommend load lazily: they read the hardware catalog and add ~45 ms to import.
_LAZY = {"fit": "hardware.fit", "estimate_speed": "hardware.performance", "Constraints": "hardware.recommend",
         "recommend_inference": "hardware.recommend", "recommend_training": "hardware.recommend",
         "load_catalog": "catalog.hardware", "find_hardware": "catalog.hardware"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'llmsizer' has no attribute {name!r}")

__all__ = [
    "Assumption", "Estimate", "HubUnavailableError", "InferenceWorkload", "InputError", "Item", "LlmsizerError",
    "ModelFileError", "ModelSpec", "UnknownNameError", "UnsupportedArchitectureError", "count_params",
    "estimate_inference", "format_names", "kv_cache", "load_model", "max_concurrency", "max_context",
    "weight_bytes", "__version__", "TrainingWorkload", "estimate_training", "max_micro_batch", "max_seq_len",
    *_LAZY,
]
