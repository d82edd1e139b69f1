"""The one deployment the router-dtype consistency tests ask every surface about (tests/consistency/
test_router_dtype_one_capability.py, tests/web/api/test_router_dtype_web.py): Nemotron 3 Nano on vLLM, one card
(an A100, whose vLLM router is fp32, or an H100, bf16), and the plan request that serves it."""

MODEL = "nvidia-nemotron-3-nano-30b-a3b-bf16"
A100, H100 = "a100-sxm-80gb", "h100-sxm"
# recommend's one-device options on each card (catalog instances of 1 x that GPU)
ONE_CARD = {A100: "gcp-a2-ultragpu-1g", H100: "gcp-a3-highgpu-1g"}
REQUEST = """\
version: 1
title: router
jobs:
  - name: chat
    kind: inference
    model: {{name: {model}}}
    engine: vllm
    start: 2027-01-04
    traffic:
      concurrency: {{typical: 1, peak: 2}}
      context: {{typical: 4096, peak: 4096}}
    service: {{duration: 1 month}}
    resources: {{device: {device}, count: 1}}
"""
