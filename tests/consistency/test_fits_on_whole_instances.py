"""``models --fits-on INSTANCE --count N`` with N a whole multiple of the instance's devices is ``fit``'s question:
``fit MODEL --device INSTANCE --count N`` takes it as N / devices instances, the model's replicas over them
(``estimate/fit.py`` ``target_and_count(instances=True)``), priced as that many. Before, fits-on refused it ("has 8
devices; drop --count or use the device name", exit 2) while fit answered "FITS [vllm, bf16, TP 8, 2 replicas]".

The truth each option is checked against is ``fit``'s own answer for the same model, instance, count, engine and
format, field by field, on every surface (the CLI's JSON through the real entry point, Python, the web API); a count
that is not whole instances gets fit's own line (exit 2). And a context past the model's window is refused by the
engine at every format (vLLM 0.19.1 vllm/config/model.py:2153-2181 _get_and_verify_max_len: the window, not the
weights), so the rejection says so, not "does not fit at the smallest format tried"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmsizer import fit
from llmsizer.estimate.context_window import engine_window
from llmsizer.models import load_model
from llmsizer.recommend import best_option_on

SRC = Path(__file__).resolve().parents[2] / "src"
MODEL = "llama-3.1-70b"
# the query also matches llama-3.1-70b-instruct (probe25 C4: the base is its own entry): the base's row is read
MODEL_ID = "meta-llama/Llama-3.1-70B"
INSTANCE = "aws-p5.48xlarge"  # 8 x H100 SXM


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsizer", *argv], capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, check=False)


def option_vs_fit(o: dict[str, Any], f: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Every field an option shares with fit's answer (JSON names), the pairs that differ."""
    sp = f["speed"] or {}
    pairs = {
        "target": (o["target"], f["target"]), "device": (o["device"], f["device"]), "count": (o["count"], f["count"]),
        "instances": (o["instances"], f["instances"]), "devices_text": (o["devices_text"], f["devices_text"]),
        "tensor_parallel": (o["tensor_parallel"], f["tensor_parallel"]), "replicas": (o["replicas"], f["replicas"]),
        "engine": (o["engine"], f["engine"]), "weights_format": (o["weights_format"], f["weights_format"]),
        "memory_per_device": (o["memory_per_device"], f["memory_per_device"]),
        "budget_per_device": (o["budget_per_device"], f["budget_per_device"]),
        "ttft_seconds": (o["ttft_seconds"], sp.get("ttft_seconds")),
        "tokens_per_second_per_user": (o["tokens_per_second_per_user"], sp.get("tokens_per_second_per_user")),
        "tokens_per_second": (o["tokens_per_second"], f["tokens_per_second_total"]),
        "running_sequences": (o["running_sequences"], f["running_sequences"]),
        "queue_wait_seconds": (o["queue_wait_seconds"], f["details"].get("queue_wait_seconds")),
        "price_per_hour": (o["price_per_hour"], f["cost"]["price_per_hour"]),
        "cost_per_million_tokens": (o["cost_per_million_tokens"], f["cost"]["per_million_tokens"]),
    }
    return {k: v for k, v in pairs.items() if v[0] != v[1]}


@pytest.mark.parametrize("conc", ["1", "64"])
def test_cli_option_is_fits_answer_on_two_instances(conc: str) -> None:
    p = run("models", MODEL, "--fits-on", INSTANCE, "--count", "16", "--concurrency", conc, "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert (data["device"], data["count"], data["devices_per_instance"]) == ("h100-sxm", 16, 8)
    (o,) = [m for m in data["models"] if m["id"] == MODEL_ID]
    assert o["status"] == "meets", o["reasons"]
    f = run("fit", MODEL, "--device", INSTANCE, "--count", "16", "--concurrency", conc, "--engine", o["engine"],
            "--weights", o["weights_format"], "--json")
    assert f.returncode == 0, f.stderr
    fj = json.loads(f.stdout)
    assert option_vs_fit(o, fj) == {}
    # two instances: two replicas of TP 8 (fit's layout), the price of two p5.48xlarge; count every device and
    # instances the machines they are (the one convention, fit's ``instances``)
    assert (o["count"], o["tensor_parallel"] * o["replicas"], o["instances"]) == (16, 16, 2)
    assert "2 instances" in fj["cost"]["basis"]
    text = run("models", MODEL, "--fits-on", INSTANCE, "--count", "16", "--concurrency", conc)
    assert text.stdout.startswith(f"models on 16 x h100-sxm ({INSTANCE}, 2 instances): "), text.stdout
    # fit's own text names the hardware the same way (it said "16 x h100-sxm (aws-p5.48xlarge)", no instance count)
    ftext = run("fit", MODEL, "--device", INSTANCE, "--count", "16", "--concurrency", conc, "--engine", o["engine"],
                "--weights", o["weights_format"])
    assert ftext.stdout.startswith(f"{fj['model']} on 16 x h100-sxm ({INSTANCE}, 2 instances): FITS"), ftext.stdout


def test_python_option_is_fits_answer() -> None:
    spec = load_model(MODEL)
    o = best_option_on(spec, INSTANCE, 16)
    f = fit(spec, INSTANCE, 16, engine=o.engine, weights=o.weights_format)
    assert o.status == "meets"
    assert option_vs_fit(o.to_dict(), f.to_dict()) == {}


@pytest.mark.parametrize("count", ["12", "4"])
def test_not_whole_instances_is_fits_line(count: str) -> None:
    fp = run("models", MODEL, "--fits-on", INSTANCE, "--count", count, "--json")
    ft = run("fit", MODEL, "--device", INSTANCE, "--count", count, "--json")
    assert fp.returncode == ft.returncode == 2
    assert fp.stderr == ft.stderr and "not whole instances" in fp.stderr and fp.stderr.count("\n") == 1


def test_web_fits_on_option_is_the_web_fit() -> None:
    pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.get("/api/v1/models/fits-on", params={"fits_on": INSTANCE, "count": "16", "query": MODEL})
        assert r.status_code == 200, r.text
        (o,) = [m for m in r.json()["models"] if m["id"] == MODEL_ID]
        f = client.post("/api/v1/fit", json={"model": MODEL, "device": INSTANCE, "count": 16, "engine": o["engine"],
                                             "weights": o["weights_format"]})
        assert f.status_code == 200, f.text
        assert option_vs_fit(o, f.json()) == {}
        bad = client.get("/api/v1/models/fits-on", params={"fits_on": INSTANCE, "count": "12", "query": MODEL})
        assert bad.status_code == 400 and "not whole instances" in bad.json()["detail"]


def test_context_past_the_window_is_the_engines_refusal_not_a_format() -> None:
    """Llama-3.1-8B's window on vLLM is 131,072 (config.json max_position_embeddings 131072, rope_type llama3: no
    factor, vLLM W1); 204,800 tokens are refused at start-up whatever the weights."""
    spec = load_model("llama-3.1-8b")
    window = engine_window(spec, "vllm")
    assert window is not None and window.tokens == 131072
    p = run("models", "llama-3.1-8b", "--fits-on", "h100-sxm", "--context", "200k", "--json")
    assert p.returncode == 1, p.stderr
    (o,) = json.loads(p.stdout)["models"]
    (why,) = o["reasons"]
    assert "smallest format tried" not in why and "awq" not in why
    assert why.startswith("vLLM will not start") and "exceeds the model's window 131,072" in why
    # fit's own refusal at the checkpoint's format, its first words (then "the memory alone: ...")
    f = json.loads(run("fit", "llama-3.1-8b", "--device", "h100-sxm", "--context", "200k", "--json").stdout)
    assert f["reasons"][0].startswith(why + ";")
    # the override lets vLLM start: then a format is taken as usual
    ok = run("models", "llama-3.1-8b", "--fits-on", "h100-sxm", "--context", "200k", "--engine", "vllm",
             "--allow-long-context", "--json")
    assert "will not start" not in " ".join(json.loads(ok.stdout)["models"][0]["reasons"])
