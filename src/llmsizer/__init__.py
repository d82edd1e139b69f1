"""llmsizer: what does this LLM workload need? Memory, time, storage and hardware, with sources.

The public API (no torch/transformers import happens here):

>>> import llmsizer
>>> est = llmsizer.estimate_inference("llama-3.1-8b", context=8192, concurrency=4)
>>> sorted(i.name for i in est.items)[:3]
['activations', 'allocator_cache', 'cuda_context']

Results print as the table the CLI prints (``print(est)``), render as an HTML table in Jupyter, and keep
``to_dict()`` for JSON. ``dir(llmsizer)`` lists the public names; ``help(llmsizer.NAME)`` documents each.
docs/python-api.md walks through a notebook session.
"""

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    HubUnavailableError,
    InputError,
    LlmsizerError,
    ModelFileError,
    UnknownNameError,
    UnsupportedArchitectureError,
)
from .result import Assumption, Estimate, Item

# The rest of the public API loads on first use, so `import llmsizer` (and the CLI's start-up) stays fast.
_LAZY = {
    "kv_cache": "formulas.kv_cache", "count_params": "formulas.params", "format_names": "formulas.weight_formats",
    "weight_bytes": "formulas.weight_formats", "estimate_inference": "estimate.inference", "load_model": "models",
    "max_concurrency": "estimate.inference.reverse", "max_context": "estimate.inference.reverse", "InferenceWorkload": "specs", "ModelSpec": "specs",
    "TrainingWorkload": "specs", "estimate_training": "estimate.training", "max_micro_batch": "estimate.training",
    "max_seq_len": "estimate.training", "fit": "estimate.fit", "fit_training": "estimate.fit",
    "estimate_speed": "estimate.speed",
    "Constraints": "recommend", "recommend_inference": "recommend",
    "recommend_training": "recommend", "load_catalog": "catalog.hardware",
    "find_hardware": "catalog.hardware", "make_plan": "plan", "plan_file": "plan", "load_request": "request",
    "FitResult": "estimate.fit", "Recommendation": "recommend", "Plan": "plan",
    "fit_llamacpp": "estimate.llamacpp_fit", "LlamaCppFit": "estimate.llamacpp_fit",
    "framework_profiles": "catalog.frameworks",
    "models_that_fit": "fits_on", "ModelsThatFit": "fits_on", "detect_hardware": "catalog.detect",
    "Detection": "catalog.detect",
}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time these load lazily through __getattr__
    from .catalog.detect import Detection, detect_hardware
    from .catalog.frameworks import framework_profiles
    from .catalog.hardware import find_hardware, load_catalog
    from .estimate.fit import FitResult, fit, fit_training
    from .estimate.inference import estimate_inference
    from .estimate.inference.reverse import max_concurrency, max_context
    from .estimate.llamacpp_fit import LlamaCppFit, fit_llamacpp
    from .estimate.speed import estimate_speed
    from .estimate.training import estimate_training, max_micro_batch, max_seq_len
    from .fits_on import ModelsThatFit, models_that_fit
    from .formulas.kv_cache import kv_cache
    from .formulas.params import count_params
    from .formulas.weight_formats import format_names, weight_bytes
    from .models import load_model
    from .plan import Plan, make_plan, plan_file
    from .recommend import Constraints, Recommendation, recommend_inference, recommend_training
    from .request import load_request
    from .specs import InferenceWorkload, ModelSpec, TrainingWorkload
del TYPE_CHECKING  # not part of the public API


# Written out (not built from _LAZY) so linters and type checkers read it; tests/api checks the two agree.
__all__ = [
    "Assumption", "Estimate", "HubUnavailableError", "InputError", "Item", "LlmsizerError", "ModelFileError",
    "UnknownNameError", "UnsupportedArchitectureError", "__version__",
    "kv_cache", "count_params", "format_names", "weight_bytes", "estimate_inference", "load_model",
    "max_concurrency", "max_context", "InferenceWorkload", "ModelSpec", "TrainingWorkload", "estimate_training",
    "max_micro_batch", "max_seq_len", "fit", "fit_training", "estimate_speed", "Constraints", "recommend_inference",
    "recommend_training", "load_catalog", "find_hardware", "make_plan", "plan_file", "load_request",
    "FitResult", "Recommendation", "Plan", "fit_llamacpp", "LlamaCppFit", "framework_profiles",
    "models_that_fit", "ModelsThatFit", "detect_hardware", "Detection",
]


# The public functions whose first argument is a ModelSpec (formulas below the model loader, and the speed
# model): as every other entry point (``estimate_inference``, ``fit``, ...) they take the model as a ModelSpec or a
# catalog name, Hub id or path, resolved by the one rule, ``models.spec_of`` (anything else refused by its
# ``model: expected a model name ...`` line). Before, ``llmsizer.kv_cache("llama-3.1-8b", 4096)`` raised an
# AttributeError from inside the formula.
_MODEL_FIRST = frozenset({"kv_cache", "count_params", "weight_bytes", "estimate_speed"})


def _model_first(f: Any) -> Any:
    """``f`` with its first argument (``spec``, positional or by name) read by ``models.spec_of``."""
    import functools
    import inspect

    from .models import spec_of

    @functools.wraps(f)
    def call(*args: Any, **kwargs: Any) -> Any:
        if args:
            args = (spec_of(args[0]), *args[1:])
        elif "spec" in kwargs:
            kwargs["spec"] = spec_of(kwargs["spec"])
        return f(*args, **kwargs)
    # what help() and inspect.signature show: the first parameter takes a name too (functools.wraps copied f's
    # ``spec: ModelSpec``, which told a reader, or a type checker reading the signature, that a name is wrong)
    sig = inspect.signature(f)
    first, *rest = sig.parameters.values()
    call.__signature__ = sig.replace(parameters=[first.replace(annotation="ModelSpec | str"), *rest])  # type: ignore[attr-defined]
    call.__annotations__ = {**getattr(f, "__annotations__", {}), first.name: "ModelSpec | str"}
    return call


def __getattr__(name: str) -> object:
    """Load a public name of ``_LAZY`` from its module on first use (a function taking a model first: wrapped
    once by ``_model_first`` and kept)."""
    if name in _LAZY:
        import importlib
        obj = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        if name in _MODEL_FIRST:
            obj = globals()[name] = _model_first(obj)
        return obj
    raise AttributeError(f"module 'llmsizer' has no attribute {name!r}")



def __dir__() -> list[str]:
    """The public API (``__all__``, including the lazily loaded names) and the module's dunder attributes; submodules
    imported along the way (``errors``, ``result``, ...) are reachable but not listed."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})
