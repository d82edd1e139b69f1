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

from .reader import RequestError, load_request, parse_request
from .schema import json_schema
from .spec import InferenceJob, Job, Request, TrainingJob
from .template import template

__all__ = ["InferenceJob", "Job", "Request", "RequestError", "TrainingJob", "json_schema", "load_request",
           "parse_request", "template"]
