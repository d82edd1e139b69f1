"""A small hardware file for fit/recommend tests: one CPU server, one 80 GiB GPU (single and 8-way instances),
an owned laptop. Provider 'test' keeps the built-in catalog out of the search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SMALL = {
    "devices": [
        {"id": "test-cpu", "name": "Test CPU server", "kind": "cpu", "form_factor": "server",
         "memory_bandwidth": "100 GB/s", "flops": {"fp32": "1 TFLOP/s"}, "tdp": "200 W"},
        {"id": "test-gpu", "name": "Test GPU 80GiB", "kind": "gpu", "form_factor": "datacenter", "memory": "80GiB",
         "memory_bandwidth": "2000 GB/s", "flops": {"bf16": "312 TFLOP/s"}, "interconnect_bandwidth": "300 GB/s",
         "tdp": "400 W"},
        {"id": "test-laptop", "name": "Test laptop", "kind": "cpu", "form_factor": "laptop", "memory": "16GiB",
         "memory_bandwidth": "60 GB/s", "flops": {"fp32": "0.5 TFLOP/s"}, "owned": True, "tdp": "45 W"},
    ],
    "instances": [
        {"id": "test-cpu-64", "name": "cpu64", "provider": "test", "device": "test-cpu", "device_count": 1,
         "memory": "64GiB", "price": 0.4},
        {"id": "test-gpu-1", "name": "gpu1", "provider": "test", "device": "test-gpu", "device_count": 1, "price": 4.0},
        {"id": "test-gpu-8", "name": "gpu8", "provider": "test", "device": "test-gpu", "device_count": 8, "price": 32.0},
    ],
}


@pytest.fixture()
def hw_file(tmp_path: Path) -> Path:
    p = tmp_path / "small-hardware.json"
    p.write_text(json.dumps(SMALL), "utf-8")
    return p
