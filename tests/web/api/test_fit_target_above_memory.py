"""probe27 D4: a fit_target not below the GPU memory is refused by the workload's own check, so the web's 400 is the
CLI's line (its field fit_target), not a 0 B budget."""

from __future__ import annotations

from web_api_helpers import cli_error_line


def test_the_web_refuses_a_fit_target_above_the_gpu_memory_as_the_cli(client) -> None:
    line = cli_error_line("infer", "llama-3.1-8b", "--engine", "llama.cpp", "--device", "rtx-3090",
                          "--fit-target", "30GiB")
    assert line.startswith("--fit-target 30.00 GiB is not less than the GPU memory 24.00 GiB"), line
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", "engine": "llamacpp", "device": "rtx-3090",
                                           "fit_target": "30GiB"})
    assert r.status_code == 400, r.text[:300]
    assert r.json()["field"] == "fit_target" and r.json()["detail"] == line
