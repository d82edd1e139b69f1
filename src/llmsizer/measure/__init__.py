"""Measure real runs and compare them with llmsizer's estimates (optional extra ``measure``).

``measure(settings)`` runs the workload for a few steps in a child process on the local device, with weights
initialised randomly from the model's config (nothing downloaded), and returns a record: the settings, device,
versions and date, the readings (allocator peaks and NVML on CUDA; live-tensor peak and RSS on CPU; timing)
and the comparison with the estimate of the same settings. ``ResultStore`` keeps records in SQLite for
``llmsizer validate``.

Importing this package imports no torch: only the worker process does.

>>> from llmsizer.measure import MeasureSettings
>>> MeasureSettings("inference", "qwen2.5-0.5b", context=2048).prompt_tokens
2032
"""

from .runner import measure, oom_message
from .settings import MeasureSettings, MeasureUnavailableError
from .store import ResultStore, append_jsonl, default_store_path, read_jsonl

__all__ = ["MeasureSettings", "MeasureUnavailableError", "ResultStore", "append_jsonl", "default_store_path", "measure", "oom_message",
           "read_jsonl"]
