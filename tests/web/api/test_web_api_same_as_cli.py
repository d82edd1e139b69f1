"""One answer: for the same input, the API's body is exactly what the real CLI prints with --json (a subprocess of
`llmsizer`), its X-Llmsizer-Exit-Code is the CLI's exit code, and every CLI exit-2 case is a 4xx whose detail is
the CLI's one line."""

from __future__ import annotations

import json
import shutil
import struct

import pytest
from web_api_helpers import ROOT, run_cli, web_line

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


EXAMPLE = ROOT / "examples" / "lora-finetune-and-chat.yaml"

# (API path, JSON body, the CLI command line a user types for the same thing)
POSTS = [
    ("/api/v1/infer", {"model": "llama-3.1-8b", "context": "8k", "kv_dtype": "fp8", "engine": "vllm",
                       "memory": "24GiB", "max_context": True, "max_concurrency": True},
     ["infer", "llama-3.1-8b", "--context", "8k", "--kv-dtype", "fp8", "--engine", "vllm", "--memory", "24GiB",
      "--max-context", "--max-concurrency"]),
    ("/api/v1/infer", {"model": "llama-3.1-70b-instruct", "memory": "24GiB", "concurrency": 4},  # does not fit: 1
     ["infer", "llama-3.1-70b-instruct", "--memory", "24GiB", "--concurrency", "4"]),
    ("/api/v1/infer", {"params": "7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "context": "16k",
                       "device": "cpu", "weights": "q4_0", "engine": "llama.cpp"},
     ["infer", "--params", "7B", "--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8",
      "--context", "16k", "--device", "cpu", "--weights", "q4_0", "--engine", "llama.cpp"]),
    ("/api/v1/train", {"model": "llama-3.1-8b", "method": "lora", "batch": 4, "seq": "4k",
                       "grad_checkpointing": "full", "memory": "24GiB", "max_batch": True, "max_seq": True},
     ["train", "llama-3.1-8b", "--method", "lora", "--batch", "4", "--seq", "4k", "--grad-checkpointing", "full",
      "--memory", "24GiB", "--max-batch", "--max-seq"]),
    ("/api/v1/train", {"model": "qwen2.5-7b", "gpus": 8, "zero": 3, "micro_batch": 2, "seq_len": 8192},
     ["train", "qwen2.5-7b", "--gpus", "8", "--zero", "3", "--micro-batch", "2", "--seq-len", "8192"]),
    ("/api/v1/train", {"model": "llama-3.1-8b", "gpus": 8, "fsdp": "full", "context_parallel": 2, "seq": "32k",
                       "compile": True, "float8": True, "activation_offload": True},
     ["train", "llama-3.1-8b", "--gpus", "8", "--fsdp", "full", "--context-parallel", "2", "--seq", "32k",
      "--compile", "--float8", "--activation-offload"]),
    ("/api/v1/train", {"model": "llama-3.1-8b", "zero": 3, "offload": "params", "grad_checkpointing": "full",
                       "checkpoint_offload": True, "tiled_mlp": True, "loss": "cut-ce", "attention": "flash",
                       "device": "h100-sxm", "max_seq": True},
     ["train", "llama-3.1-8b", "--zero", "3", "--offload", "params", "--grad-checkpointing", "full",
      "--checkpoint-offload", "--tiled-mlp", "--loss", "cut-ce", "--attention", "flash", "--device", "h100-sxm",
      "--max-seq"]),
    ("/api/v1/train", {"model": "qwen2.5-0.5b", "method": "full", "device": "h100-sxm", "gpus": 16,
                       "gpus_per_node": 8, "network": "1600 Gb/s", "grad_accumulation": 4, "grad_sync": "micro-step",
                       "tokens": "1B"},
     ["train", "qwen2.5-0.5b", "--method", "full", "--device", "h100-sxm", "--gpus", "16", "--gpus-per-node", "8",
      "--network", "1600 Gb/s", "--grad-accumulation", "4", "--grad-sync", "micro-step", "--tokens", "1B"]),
    ("/api/v1/fit", {"model": "llama-3.1-8b", "device": "rtx-4090", "weights": "q4_k_m", "context": "8k"},
     ["fit", "llama-3.1-8b", "--device", "rtx-4090", "--weights", "q4_k_m", "--context", "8k"]),
    ("/api/v1/fit", {"model": "llama-3.1-70b-instruct", "device": "a100-sxm-80gb"},  # does not fit on one: 1
     ["fit", "llama-3.1-70b-instruct", "--device", "a100-sxm-80gb"]),
    ("/api/v1/fit", {"model": "llama-3.1-8b", "device": "h100-sxm", "train": True, "method": "lora", "batch": 4,
                     "seq": 4096, "tokens": "1B"},
     ["fit", "llama-3.1-8b", "--device", "h100-sxm", "--train", "--method", "lora", "--batch", "4", "--seq", "4096",
      "--tokens", "1B"]),
    ("/api/v1/fit", {"model": "llama-3.1-70b-instruct", "device": "rtx-3090", "count": 2, "weights": "q4_k_m",
                     "auto": True},  # llama.cpp's auto-fit: another answer shape, the same rule
     ["fit", "llama-3.1-70b-instruct", "--device", "rtx-3090", "--count", "2", "--weights", "q4_k_m", "--auto"]),
    ("/api/v1/infer", {"model": "qwen2.5-7b", "engine": "sglang", "memory": "24GiB", "context": "16k"},
     ["infer", "qwen2.5-7b", "--engine", "sglang", "--memory", "24GiB", "--context", "16k"]),
    ("/api/v1/recommend", {"model": "qwen2.5-1.5b-instruct", "laptop": True},
     ["recommend", "qwen2.5-1.5b-instruct", "--laptop"]),
    ("/api/v1/recommend", {"model": "llama-3.1-8b", "provider": ["aws", "gcp"], "max_cost_per_hour": 5,
                           "concurrency": 8, "max_ttft": "1s"},
     ["recommend", "llama-3.1-8b", "--provider", "aws", "--provider", "gcp", "--max-cost-per-hour", "5",
      "--concurrency", "8", "--max-ttft", "1s"]),
    ("/api/v1/inspect", {"model": "qwen3-30b-a3b"}, ["inspect", "qwen3-30b-a3b"]),
    # --device is a catalog device in every command (tests/cli/test_device_meaning.py): named, generic, no memory
    ("/api/v1/infer", {"model": "llama-3.1-8b", "device": "rtx-4090"}, ["infer", "llama-3.1-8b", "--device", "rtx-4090"]),
    # no engine: the device's default engine, fit's (tests/cli/test_default_engine.py): vLLM in a data centre
    ("/api/v1/infer", {"model": "llama-3.1-8b", "device": "h100-sxm"}, ["infer", "llama-3.1-8b", "--device", "h100-sxm"]),
    ("/api/v1/infer", {"model": "llama-3.1-8b", "device": "cpu", "memory": "32GiB", "engine": "llamacpp"},
     ["infer", "llama-3.1-8b", "--device", "cpu", "--memory", "32GiB", "--engine", "llamacpp"]),
    ("/api/v1/fit", {"model": "llama-3.1-8b", "device": "cpu", "memory": "32GiB", "engine": "llamacpp"},
     ["fit", "llama-3.1-8b", "--device", "cpu", "--memory", "32GiB", "--engine", "llamacpp"]),
    ("/api/v1/train", {"model": "llama-3.1-8b", "device": "cpu", "method": "lora"},
     ["train", "llama-3.1-8b", "--device", "cpu", "--method", "lora"]),
    # the engine release picks the host-work rule (estimate/engines.py step_host): 0.13 is serial, not established
    ("/api/v1/fit", {"model": "qwen3-0.6b", "device": "h100-sxm", "engine": "vllm", "engine_version": "0.13"},
     ["fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version", "0.13"]),
]

GETS = [
    ("/api/v1/models?query=qwen3", ["models", "qwen3"]),
    ("/api/v1/models?query=qwen2.5&fits_on=rtx-4090&context=8k", ["models", "qwen2.5", "--fits-on", "rtx-4090",
                                                                  "--context", "8k"]),
    ("/api/v1/models/deepseek-ai/DeepSeek-V3", ["inspect", "deepseek-ai/DeepSeek-V3"]),
    ("/api/v1/hardware?kind=apple", ["hardware", "list", "--kind", "apple"]),
    ("/api/v1/hardware?query=h100&provider=aws", ["hardware", "list", "h100", "--provider", "aws"]),
    ("/api/v1/hardware/p5.48xlarge", ["hardware", "show", "p5.48xlarge"]),
    ("/api/v1/formats", ["formats"]),
]


def _same(response, cli) -> None:
    assert response.status_code == 200, response.text
    assert cli.returncode in (0, 1), cli.stderr
    assert response.text == cli.stdout  # byte for byte: the same renderer
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-llmsizer-exit-code"] == str(cli.returncode)


@pytest.mark.parametrize("path, body, argv", POSTS, ids=[" ".join(p[2][:2]) for p in POSTS])
def test_post_answers_are_the_cli_json(client, path, body, argv):
    _same(client.post(path, json=body), run_cli(*argv, "--json"))


@pytest.mark.parametrize("path, argv", GETS, ids=[p[0] for p in GETS])
def test_get_answers_are_the_cli_json(client, path, argv):
    _same(client.get(path), run_cli(*argv, "--json"))


def test_infer_fit_and_train_size_the_same_cpu_host(client):
    """The web's device field is the CLI's --device: one meaning in every route (tests/cli/test_device_meaning.py)."""
    body = {"model": "llama-3.2-1b", "device": "cpu", "memory": "64GiB"}
    inf = client.post("/api/v1/infer", json={**body, "engine": "llamacpp"}).json()
    fit = client.post("/api/v1/fit", json={**body, "engine": "llamacpp"}).json()
    assert inf["totals"] == fit["memory"]["totals"] and set(inf["totals"]) == {"host"}
    assert inf["details"]["memory_budget"] == fit["budget_per_device"]
    train = client.post("/api/v1/train", json={**body, "method": "lora"}).json()
    fit_train = client.post("/api/v1/fit", json={**body, "train": True, "method": "lora"}).json()
    assert train["totals"] == fit_train["memory"]["totals"]
    assert "cuda_context" not in {i["name"] for i in inf["items"] + train["items"]}


def test_does_not_fit_is_a_normal_answer_with_its_verdict(client):
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-70b-instruct", "memory": "24GiB"})
    assert r.status_code == 200 and r.headers["x-llmsizer-exit-code"] == "1"
    assert r.json()["details"]["fits"] is False


# ------------------------------------------------------------------------------------------- requests and plans

@pytest.fixture
def request_dir(tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "request.yaml")
    return tmp_path


def test_plan_json_html_and_markdown_are_the_cli_reports(client, request_dir):
    text = (request_dir / "request.yaml").read_text()
    today = ["--today", "2026-03-02"]
    cli = run_cli("plan", "request.yaml", "--json", *today, cwd=request_dir)
    r = client.post("/api/v1/plan", json={"request": text, "today": "2026-03-02"})
    _same(r, cli)
    for fmt, media in (("html", "text/html"), ("md", "text/markdown")):
        out = run_cli("plan", "request.yaml", "-o", f"report.{fmt}", "-q", *today, cwd=request_dir)
        assert out.returncode in (0, 1), out.stderr
        r = client.post("/api/v1/plan", json={"request": text, "today": "2026-03-02", "format": fmt})
        assert r.status_code == 200 and r.headers["content-type"].startswith(media)
        assert r.text == (request_dir / f"report.{fmt}").read_text()
        assert r.headers["x-llmsizer-exit-code"] == str(out.returncode)
        if fmt == "html":  # the report runs no script, even if opened on its own
            assert "sandbox" in r.headers["content-security-policy"]


def test_request_check_valid_and_invalid_are_the_cli_json(client, request_dir):
    text = (request_dir / "request.yaml").read_text()
    _same(client.post("/api/v1/request/check", json={"request": text}),
          run_cli("request", "check", "request.yaml", "--json", cwd=request_dir))
    broken = text.replace("concurrency:", "concurency:", 1)
    (request_dir / "broken.yaml").write_text(broken)
    cli = run_cli("request", "check", "broken.yaml", "--json", cwd=request_dir)
    assert cli.returncode == 2 and cli.stdout == ""  # bad input, as plan says of the same file (below)
    lines = [ln.removeprefix("llmsizer: error: ").removesuffix(" (see --help)") for ln in cli.stderr.splitlines()]
    r = client.post("/api/v1/request/check", json={"request": broken, "filename": "broken.yaml"})
    assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["errors"] == lines and lines[0].startswith("broken.yaml:")
    assert r.json() == client.post("/api/v1/plan", json={"request": broken, "filename": "broken.yaml"}).json()


def test_plan_of_an_invalid_request_is_a_400_with_the_cli_lines(client, request_dir):
    broken = (request_dir / "request.yaml").read_text().replace("concurrency:", "concurency:", 1)
    (request_dir / "broken.yaml").write_text(broken)
    cli = run_cli("plan", "broken.yaml", cwd=request_dir)
    assert cli.returncode == 2
    lines = [ln.removeprefix("llmsizer: error: ").removesuffix(" (see --help)") for ln in cli.stderr.splitlines()]
    r = client.post("/api/v1/plan", json={"request": broken, "filename": "broken.yaml"})
    assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json"
    p = r.json()
    assert p["errors"] == lines and p["detail"] == lines[0] and p["field"] == "request"
    assert ":" in lines[0] and lines[0].startswith("broken.yaml:")  # the line number of the problem


def test_request_template_is_request_new(client):
    r = client.get("/api/v1/request/template")
    assert r.status_code == 200 and r.text == run_cli("request", "new").stdout
    r = client.get("/api/v1/request/schema")
    assert r.status_code == 200 and r.text == run_cli("request", "schema").stdout


# ---------------------------------------------------------------------------------------- models from files

def test_a_config_json_object_is_the_cli_reading_that_file(client, tmp_path):
    import readers_helpers as H
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(json.dumps(H.LLAMA_CONFIG))
    cli = run_cli("infer", "tiny/config.json", "--context", "256", "--json", cwd=tmp_path)
    r = client.post("/api/v1/infer", json={"config": H.LLAMA_CONFIG, "config_name": "tiny", "context": 256})
    _same(r, cli)


def test_a_gguf_header_alone_gives_the_cli_answer_for_the_whole_file(client, tmp_path):
    pytest.importorskip("gguf")
    import gguf
    import readers_helpers as H
    model = H.llama_gguf()
    path = tmp_path / "tiny-llama-Q4_0.gguf"
    model.write(path)
    header_end = gguf.GGUFReader(str(path)).data_offset  # gguf-py's own reading of where the tensor data starts
    data = path.read_bytes()
    assert header_end < len(data)
    up = client.post("/api/v1/model-files", params={"kind": "gguf", "name": path.name, "size": len(data)},
                     content=data[:header_end], headers={"content-type": "application/octet-stream"})
    assert up.status_code == 200, up.text
    assert up.json()["bytes"] == sum(model.expected_bytes().values())  # the writer's bytes, not ours
    assert up.json()["tensors"] == len(model.tensors)
    assert up.json()["model"] == json.loads(run_cli("inspect", path.name, "--json", cwd=tmp_path).stdout)
    cli = run_cli("infer", path.name, "--engine", "llamacpp", "--context", "256", "--json", cwd=tmp_path)
    r = client.post("/api/v1/infer", json={"model_file": up.json()["model_file"], "engine": "llamacpp",
                                           "context": 256})
    _same(r, cli)


def test_a_safetensors_header_with_its_config_is_the_cli_reading_the_folder(client, tmp_path):
    pytest.importorskip("safetensors")
    import readers_helpers as H
    folder = tmp_path / "tiny-llama"
    (weights,) = H.write_folder(folder, H.LLAMA_CONFIG, H.random_arrays(H.llama_shapes(H.LLAMA_CONFIG)))
    data = weights.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])  # safetensors format: 8-byte length, then the JSON header
    up = client.post("/api/v1/model-files", params={"kind": "safetensors", "name": weights.name, "size": len(data)},
                     content=data[:8 + n], headers={"content-type": "application/octet-stream"})
    assert up.status_code == 200, up.text
    assert up.json()["bytes"] == H.safetensors_data_size(weights)
    assert up.json()["tensors"] == len(H.llama_shapes(H.LLAMA_CONFIG))
    cli = run_cli("infer", "tiny-llama", "--context", "256", "--json", cwd=tmp_path)
    r = client.post("/api/v1/infer", json={"config": H.LLAMA_CONFIG, "config_name": "tiny-llama",
                                           "model_file": up.json()["model_file"], "context": 256})
    _same(r, cli)


# -------------------------------------------------------------------------------- exit 2 = 4xx, the same line

ERRORS = [
    # (API path, body, CLI argv, the field the problem names)
    ("/api/v1/infer", {"model": "llama-3.1-8b", "context": -1}, ["infer", "llama-3.1-8b", "--context", "-1"],
     "context"),
    ("/api/v1/infer", {"model": "llama-3.1-8bb"}, ["infer", "llama-3.1-8bb"], "model"),
    ("/api/v1/infer", {"model": "llama-3.1-8b", "engine": "tgi"}, ["infer", "llama-3.1-8b", "--engine", "tgi"],
     "engine"),
    ("/api/v1/infer", {"model": "llama-3.1-8b", "memory": "lots"}, ["infer", "llama-3.1-8b", "--memory", "lots"],
     "memory"),
    # refused by the flag's own type since #16 (the message names --weights, so the problem names its field)
    ("/api/v1/infer", {"model": "llama-3.1-8b", "weights": "q9_z"}, ["infer", "llama-3.1-8b", "--weights", "q9_z"],
     "weights"),
    # the unknown option as a command line types it, `--frobnicate 1` (was compared with `--frobnicate=1`, the word
    # the API hands argparse)
    ("/api/v1/infer", {"model": "llama-3.1-8b", "frobnicate": 1}, ["infer", "llama-3.1-8b", "--frobnicate", "1"],
     "frobnicate"),
    ("/api/v1/infer", {"model": "llama-3.1-8b", "layers": 32}, ["infer", "llama-3.1-8b", "--layers", "32"], "model"),
    ("/api/v1/infer", {}, ["infer"], "model"),
    ("/api/v1/train", {"model": "llama-3.1-8b", "tokens": "1B"}, ["train", "llama-3.1-8b", "--tokens", "1B"],
     "tokens"),
    ("/api/v1/train", {"model": "llama-3.1-8b", "batch": 0}, ["train", "llama-3.1-8b", "--batch", "0"], "batch"),
    ("/api/v1/train", {"model": "llama-3.1-8b", "fsdp_version": 1}, ["train", "llama-3.1-8b", "--fsdp-version", "1"],
     "fsdp_version"),  # the given field the message names (problems.named_field; was None)
    ("/api/v1/fit", {"model": "llama-3.1-8b"}, ["fit", "llama-3.1-8b"], "device"),
    ("/api/v1/fit", {"model": "llama-3.1-8b", "device": "h100-sxmm"}, ["fit", "llama-3.1-8b", "--device",
                                                                      "h100-sxmm"], "device"),  # its quoted value
    ("/api/v1/fit", {"model": "llama-3.1-8b", "device": "cpu"}, ["fit", "llama-3.1-8b", "--device", "cpu"],
     "memory"),
    ("/api/v1/infer", {"model": "llama-3.1-8b", "device": "aws-p5.48xlarge"},
     ["infer", "llama-3.1-8b", "--device", "aws-p5.48xlarge"], "device"),
    ("/api/v1/recommend", {"model": "llama-3.1-8b", "train": True}, ["recommend", "llama-3.1-8b", "--train"],
     "train"),
    # a provider typo answered "0 options" with exit 1 (a constraint that fails) before it was refused
    ("/api/v1/recommend", {"model": "llama-3.1-8b", "provider": ["awz"]},
     ["recommend", "llama-3.1-8b", "--provider", "awz"], "provider"),
    ("/api/v1/plan", {"request": EXAMPLE.read_text(), "today": "tomorrow"},
     ["plan", str(EXAMPLE), "--today", "tomorrow"], "today"),
    # a release tag that is no release (was read as 0.53), and a release for an engine without releases here
    ("/api/v1/fit", {"model": "qwen3-0.6b", "device": "h100-sxm", "engine": "vllm", "engine_version": "0.5e3"},
     ["fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version", "0.5e3"],
     "engine_version"),
    ("/api/v1/fit", {"model": "qwen3-0.6b", "device": "rtx-4090", "engine": "llamacpp", "engine_version": "0.19"},
     ["fit", "qwen3-0.6b", "--device", "rtx-4090", "--engine", "llamacpp", "--engine-version", "0.19"],
     "engine_version"),  # the field at fault (errors.FieldError; was None: the message names no --flag)
]


@pytest.mark.parametrize("path, body, argv, field", ERRORS, ids=[" ".join(e[2][:3]) for e in ERRORS])
def test_bad_input_is_a_400_with_the_cli_line(client, path, body, argv, field):
    cli = run_cli(*argv)
    assert cli.returncode == 2 and cli.stdout == ""
    (line,) = cli.stderr.splitlines()
    r = client.post(path, json=body)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/problem+json"
    p = r.json()
    # the CLI's line, a field error's too (bridge.field_problem: one rule, API.md "Errors"); argparse's where-prefix
    # names the field the body gave (web_line, probe24 C4)
    cli_line = line.removeprefix("llmsizer: error: ").removesuffix(" (see --help)")  # the web has no --help
    assert p["detail"] == web_line(cli_line, field)
    assert p["status"] == 400 and p["title"] == "Bad Request" and p["type"] == "about:blank"
    assert p.get("field") == field


@pytest.mark.parametrize("path, argv", [("/api/v1/hardware/h100-sxmm", ["hardware", "show", "h100-sxmm"]),
                                        ("/api/v1/models/llama-3.1-8bb", ["inspect", "llama-3.1-8bb"])])
def test_an_unknown_name_in_the_path_is_a_404_with_the_cli_line(client, path, argv):
    cli = run_cli(*argv)
    assert cli.returncode == 2
    r = client.get(path)
    assert r.status_code == 404 and "llmsizer: error: " + r.json()["detail"] == cli.stderr.strip().removesuffix(" (see --help)")


@pytest.mark.parametrize(("path", "body", "argv"), [
    ("/api/v1/infer", {"model": "llama-3.1-8b", "engine": "vllm", "kv_dtype": "q4_0"},
     ["infer", "llama-3.1-8b", "--engine", "vllm", "--kv-dtype", "q4_0"]),
    ("/api/v1/recommend", {"model": "qwen2.5-0.5b", "deadline": "3d"}, ["recommend", "qwen2.5-0.5b", "--deadline", "3d"]),
    ("/api/v1/fit", {"model": "qwen2.5-0.5b", "device": "h100-sxm", "train": True, "context": "64k"},
     ["fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--train", "--context", "64k"]),
])
def test_input_of_another_mode_or_engine_is_the_same_4xx_as_the_cli(client, path, body, argv):
    r = client.post(path, json=body)
    cli = run_cli(*argv)
    assert cli.returncode == 2 and 400 <= r.status_code < 500, (r.status_code, r.text)
    assert cli.stderr.strip().removeprefix("llmsizer: error: ").removesuffix(" (see --help)") in r.text, (r.text, cli.stderr)
