"""The web's /fit gives the CLI's answer, byte for byte, where fit's hint is llama.cpp with experts in host memory
(estimate/format_search.py ``experts_in_host_at``, `models --fits-on`'s answer) and where the device's default
engine cannot run the checkpoint (DeepSeek-R1's FP8 block scales on a V100: answered on llama.cpp, exit 1 / 200);
an engine named that the device cannot run stays one line (exit 2 / 400)."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import cli_error_line, run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL = "deepseek-r1"


@pytest.mark.parametrize("device", ["v100-sxm2-32gb", "h100-sxm"])
def test_web_fit_is_the_cli_answer_with_the_experts_hint(client, device: str) -> None:
    done = run_cli("fit", MODEL, "--device", device, "--json")
    assert done.returncode == 1, done.stderr
    r = client.post("/api/v1/fit", json={"model": MODEL, "device": device})
    assert r.status_code == 200 and r.text == done.stdout
    fits_on = json.loads(run_cli("models", MODEL, "--fits-on", device, "--json").stdout)
    assert r.json()["fits_at"]["experts_in_host"] == fits_on["models"][0]["experts_in_host"] is not None


def test_web_engine_the_device_cannot_run_stays_bad_input(client) -> None:
    line = cli_error_line("fit", MODEL, "--device", "v100-sxm2-32gb", "--engine", "vllm")
    r = client.post("/api/v1/fit", json={"model": MODEL, "device": "v100-sxm2-32gb", "engine": "vllm"})
    # the same refusal; the web names fields where the CLI names flags (weights, not --weights)
    assert r.status_code == 400 and line.split(":")[0] in r.json()["detail"] and "vLLM refuses fp8-block" in line
