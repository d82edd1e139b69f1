"""The web API's /fit checks llama.cpp's host part against ``host_memory`` as the CLI's ``fit --host-memory`` does
(issue #16 (c)): the same body byte for byte and the same exit code, below the host part (1) and above it (0), and
``fit --auto``'s decode tokens/s (issue #16 (b)) in the body as the CLI prints it."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

BODY = {"model": "llama-3.1-8b", "device": "rtx-4090", "engine": "llamacpp", "weights": "q4_k_m", "n_gpu_layers": "20"}
ARGV = "fit llama-3.1-8b --device rtx-4090 --engine llamacpp --weights q4_k_m --n-gpu-layers 20".split()  # BODY's


@pytest.mark.parametrize("ram, code", [("1GiB", 1), ("64GiB", 0)])
def test_fit_host_memory_is_the_clis(client, ram, code) -> None:
    r = client.post("/api/v1/fit", json={**BODY, "host_memory": ram})
    cli = run_cli(*ARGV, "--host-memory", ram, "--json")
    assert cli.returncode == code, cli.stderr
    assert r.status_code == 200 and r.text == cli.stdout
    assert r.headers["x-llmsizer-exit-code"] == str(code)


def test_fit_auto_speed_is_the_clis(client) -> None:
    body = {
        "model": "llama-3.3-70b-instruct",
        "device": "rtx-3090",
        "engine": "llamacpp",
        "weights": "q4_k_m",
        "auto": True,
        "free": "23GiB,11GiB",
        "host_device": "intel-core-i9-13900k",
    }
    r = client.post("/api/v1/fit", json=body)
    # the same question on the command line (the body's fields as flags)
    cli = run_cli(*"fit llama-3.3-70b-instruct --device rtx-3090 --engine llamacpp --weights q4_k_m --auto --free "
                   "23GiB,11GiB --host-device intel-core-i9-13900k --json".split())
    assert r.status_code == 200 and r.text == cli.stdout
    assert r.json()["speed"]["tokens_per_second"] > 0
