"""A 400 about one workload field names that field, the one the request got wrong (probe4 finding).

The checks of InferenceWorkload and of the estimate that are about one field raise ``errors.FieldError`` (the field
named), and the web's problem reads it. Before, ``field`` came from the first ``--flag`` the message happened to
mention: null for "output_tokens must be between 0 and context ...", and "tp" for "gpus applies to engine llamacpp;
vllm shards a model with tensor_parallel (--tp N ...)", which named the advice, not the field at fault. The detail
stays the CLI's line (the same function raises it for both)."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

CASES = [  # (body beside the model, the field given wrong, the same input on the command line)
    ({"context": 8192, "output_tokens": 10000}, "output_tokens", ("--context", "8192", "--output-tokens", "10000")),
    ({"image_size": "640x480"}, "image_size", ("--image-size", "640x480")),
    ({"device": "h100-sxm", "gpus": 2}, "gpus", ("--device", "h100-sxm", "--gpus", "2")),
    ({"engine": "llamacpp", "n_cpu_moe": 3}, "n_cpu_moe", ("--engine", "llamacpp", "--n-cpu-moe", "3")),
    ({"engine": "llamacpp", "gpu_memory_utilization": 0.5}, "gpu_memory_utilization",
     ("--engine", "llamacpp", "--gpu-memory-utilization", "0.5")),
]


@pytest.mark.parametrize(("body", "field", "argv"), CASES, ids=[c[1] for c in CASES])
def test_a_field_error_names_its_field(client, body, field, argv) -> None:
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", **body})
    assert r.status_code == 400, r.text
    problem = r.json()
    assert problem["field"] == field, problem
    assert problem["detail"] == cli_error_line("infer", "llama-3.1-8b", *argv)
