"""A 400 about one workload field names that field, the one the request got wrong (probe4 finding).

The checks of InferenceWorkload and of the estimate that are about one field raise ``errors.FieldError`` (the field
named), and the web's problem reads it. Before, ``field`` came from the first ``--flag`` the message happened to
mention: null for "output_tokens must be between 0 and context ...", and "tp" for "gpus applies to engine llamacpp;
vllm shards a model with tensor_parallel (--tp N ...)", which named the advice, not the field at fault. The detail
is the CLI's line, flags and all (the one rule of the web's errors, API.md "Errors"; task webwords: before, the
web wrote a FieldError's flag as the body's key but every other error's as the CLI's flag)."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

CASES = [  # (body beside the model, the field given wrong, the same input on the command line)
    ({"context": 8192, "output_tokens": 10000}, "output_tokens", ("--context", "8192", "--output-tokens", "10000")),
    ({"image_size": "640x480"}, "image_size", ("--image-size", "640x480")),
    # (an engine named: with none, gpus above 1 implies llama.cpp, specs/workload.py implied_engine)
    ({"device": "h100-sxm", "engine": "vllm", "gpus": 2}, "gpus", ("--device", "h100-sxm", "--engine", "vllm", "--gpus",
                                                                   "2")),
    ({"engine": "llamacpp", "n_cpu_moe": 3}, "n_cpu_moe", ("--engine", "llamacpp", "--n-cpu-moe", "3")),
    ({"engine": "llamacpp", "gpu_memory_utilization": 0.5}, "gpu_memory_utilization",
     ("--engine", "llamacpp", "--gpu-memory-utilization", "0.5")),
    # transformers' attn_implementation, read by no other engine (before: vLLM answered, the field ignored)
    ({"engine": "vllm", "attention": "eager"}, "attention", ("--engine", "vllm", "--attention", "eager")),
    ({"device": "h100-sxm", "engine": "sglang", "attention": "flash"}, "attention",
     ("--device", "h100-sxm", "--engine", "sglang", "--attention", "flash")),
]


@pytest.mark.parametrize(("body", "field", "argv"), CASES, ids=[c[1] for c in CASES])
def test_a_field_error_names_its_field(client, body, field, argv) -> None:
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", **body})
    assert r.status_code == 400, r.text
    problem = r.json()
    assert problem["field"] == field, problem
    # the CLI's line (API.md: detail is exactly what the CLI prints); the body's key is ``field``
    flag = argv[-2]
    line = cli_error_line("infer", "llama-3.1-8b", *argv)
    assert line.startswith(flag) and problem["detail"] == line


@pytest.mark.parametrize("key", ["tp", "tensor_parallel"])
def test_the_field_is_the_bodys_key_and_the_flag_on_the_cli(client, key: str) -> None:
    """A TP degree that does not divide the heads: the CLI's line names --tp on both surfaces, the web's ``field``
    the key the body used (it said 'tensor_parallel' for a body that said 'tp'), Python the field name. 32 heads
    (the model's config.json)."""
    r = client.post("/api/v1/fit", json={"model": "llama-3.1-8b", "device": "h100-sxm", "count": 3, key: 3})
    problem = r.json()
    assert r.status_code == 400 and problem["field"] == key, problem
    line = cli_error_line("fit", "llama-3.1-8b", "--device", "h100-sxm", "--count", "3", "--tp", "3")
    assert line.startswith("--tp 3 does not divide the 32 attention heads") and problem["detail"] == line
    from llmsizer.errors import FieldError
    from llmsizer.estimate.fit import fit
    with pytest.raises(FieldError, match=r"^tensor_parallel 3 does not divide"):
        fit("llama-3.1-8b", "h100-sxm", 3, tensor_parallel=3)


@pytest.mark.parametrize(("body", "flags"), [({"method": "lora"}, ("--method", "lora")),
                                             ({"micro_batch": 4}, ("--micro-batch", "4")),
                                             ({"optimizer": "adamw"}, ("--optimizer", "adamw")),
                                             ({"batch": 4}, ("--batch", "4"))])
def test_a_training_field_on_infer_points_at_training(client, body, flags) -> None:
    """A training field in an /infer body: a 400 naming the field, with the CLI's words for `infer --method lora`
    (where training is sized, not argparse's closest serving option). The usage part before them spells the
    option as the API passed it to the parser (--method=lora)."""
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", **body})
    problem = r.json()
    assert r.status_code == 400 and problem["field"] == next(iter(body)), problem
    line = cli_error_line("infer", "llama-3.1-8b", *flags)
    hint = line.split("; ", 1)[1]
    assert hint.startswith(f"{flags[0]} is a training option") and "did you mean" not in hint, line
    assert problem["detail"].split("; ", 1)[1] == hint, (problem, line)


def test_a_training_hint_follows_each_requests_own_fields(client) -> None:
    """The web keeps one parser per command: the words of an earlier request (here its train: true) must not decide
    whether a later one is a serving question (before, the first request's argv stayed on the parser)."""
    lora = {"model": "llama-3.1-8b", "device": "h100-sxm", "lora": 8}
    trained = client.post("/api/v1/fit", json={**lora, "train": True}).json()
    served = client.post("/api/v1/fit", json=lora).json()
    assert "did you mean '--method lora --rank N'?" in trained["detail"], trained
    line = cli_error_line("fit", "llama-3.1-8b", "--device", "h100-sxm", "--lora", "8")
    assert served["field"] == "lora" and served["detail"].split("; ", 1)[1] == line.split("; ", 1)[1], (served, line)
    assert "training option" in line, line


@pytest.mark.parametrize("endpoint", ["infer", "fit"])
def test_a_missing_image_size_names_image_size(client, endpoint: str) -> None:
    """probe3 #10: Qwen-VL images without a size (dynamic resolution: the tokens depend on it) is a 400 about
    ``image_size``, the input to give. Before, ``field`` was "model": the problem took the message's opening "model
    'Qwen/...'" as the field at fault. The detail stays the CLI's line, which spells the flag, the web's field, the
    Python keyword and the request key itself (nothing renamed; probe27 N2: it named the flag alone first)."""
    body = {"model": "qwen2.5-vl-7b-instruct", "images": 2, **({"device": "l40s"} if endpoint == "fit" else {})}
    r = client.post(f"/api/v1/{endpoint}", json=body)
    problem = r.json()
    assert r.status_code == 400 and problem["field"] == "image_size", problem
    argv = ("--images", "2", *(("--device", "l40s") if endpoint == "fit" else ()))
    line = cli_error_line(endpoint, "qwen2.5-vl-7b-instruct", *argv)
    assert problem["detail"] == line and "give the image size, WIDTHxHEIGHT (--image-size on the command line, " \
        "image_size in the web API, image_size=(W, H) in Python, media.image_size in a request file)" in line, line
