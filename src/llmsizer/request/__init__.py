"""Resource requests: a YAML file describing training and inference jobs separately, validated with
line-numbered errors, and published as a JSON Schema.

>>> from llmsizer.request import parse_request
>>> req = parse_request('''
... jobs:
...   - name: chat
...     kind: inference
...     model: {name: qwen2.5-0.5b}
...     traffic: {concurrency: {typical: 4, peak: 16}, context: 4k}
... ''')
>>> req.jobs[0].traffic.concurrency.peak
16
"""

from typing import TYPE_CHECKING

# The names below load on first use (PEP 562), so importing one submodule (the CLI's flags read durations with
# request.quantities) does not build the request file's ~30 dataclasses and reader: the `infer` start-up.
_LAZY = {"RequestError": "reader", "load_request": "reader", "parse_request": "reader", "json_schema": "schema",
         "InferenceJob": "spec", "Job": "spec", "Request": "spec", "TrainingJob": "spec", "template": "template"}

if TYPE_CHECKING:
    from .reader import RequestError, load_request, parse_request
    from .schema import json_schema
    from .spec import InferenceJob, Job, Request, TrainingJob
    from .template import template

__all__ = ["InferenceJob", "Job", "Request", "RequestError", "TrainingJob", "json_schema", "load_request",
           "parse_request", "template"]


def __getattr__(name: str) -> object:
    """Load a name of ``_LAZY`` from its submodule on first use."""
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'llmsizer.request' has no attribute {name!r}")
