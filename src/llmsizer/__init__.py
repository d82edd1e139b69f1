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
from .result import Assumption, Estimate, Item

__version__ = "0.1.0"

# The rest of the public API loads on first use, so `import llmsizer` (and the CLI's start-up) stays fast.
_LAZY = {
    "kv_cache": "formulas.kv_cache", "count_params": "formulas.params", "format_names": "formulas.weight_formats",
    "weight_bytes": "formulas.weight_formats", "estimate_inference": "inference", "load_model": "models",
    "max_concurrency": "reverse", "max_context": "reverse", "InferenceWorkload": "specs", "ModelSpec": "specs",
    "TrainingWorkload": "specs", "estimate_training": "training", "max_micro_batch": "training",
    "max_seq_len": "training", "fit": "hardware.fit", "estimate_speed": "hardware.performance",
    "Constraints": "hardware.recommend", "recommend_inference": "hardware.recommend",
    "recommend_training": "hardware.recommend", "load_catalog": "catalog.hardware",
    "find_hardware": "catalog.hardware", "make_plan": "plan", "plan_file": "plan", "load_request": "request",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'llmsizer' has no attribute {name!r}")

__all__ = [
    "Assumption", "Estimate", "HubUnavailableError", "InputError", "Item", "LlmsizerError", "ModelFileError",
    "UnknownNameError", "UnsupportedArchitectureError", "__version__", *_LAZY,
]
