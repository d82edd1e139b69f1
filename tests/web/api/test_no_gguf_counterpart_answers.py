"""A checkpoint with no GGUF counterpart (DeepSeek-R1: FP8 with 128x128 block scales) on a device whose default
engine is llama.cpp (one consumer GPU, Apple) gets an answer, not a bad-input error. Before (main 66230141) `fit`,
`infer --device`, a plan of the job, the web's /fit (400) and ``llmsizer.fit`` (InputError) stopped with "engine
llamacpp runs GGUF formats; ... stored as 'fp8-block', which has no GGUF counterpart", while `models --fits-on`
walked the GGUF ladder and answered for the same model and device. The default is now the ladder's own first rung
(estimate/formats.py ``gguf_stand_in``), stated as a default; the truth each answer is checked against is
`models --fits-on`'s own pick and figure for the same device and memory, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from web_api_helpers import cli_error_line, run_cli

import llmsizer

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL = "deepseek-r1"


def _cli(*argv: str) -> tuple[int, dict]:
    done = run_cli(*argv, "--json")
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def _fits_on(device: str, memory: str) -> dict:
    """`models --fits-on`'s row for MODEL: the format its ladder walk picked and that format's memory per device."""
    code, data = _cli("models", MODEL, "--fits-on", device, "--memory", memory)
    return next(m for m in data["models"] if m["id"].endswith("/DeepSeek-R1"))


@pytest.mark.parametrize("device", ["rtx-4090", "apple-m3-max-48gb"])
def test_fit_infer_and_plan_answer_does_not_fit_with_the_default_named(device: str, tmp_path: Path) -> None:
    code, fit = _cli("fit", MODEL, "--device", device)
    assert code == 1 and fit["fits"] is False and fit["engine"] == "llamacpp"
    weights = next(a for a in fit["memory"]["assumptions"] if a["name"] == "weights")
    assert weights["value"] == fit["weights_format"] and weights["default"] is True
    assert "no GGUF counterpart" in weights["why"] and "fp8-block" in weights["why"]
    # the ladder models --fits-on walks starts at this format: with the memory to hold it, that is its pick
    row = _fits_on(device, "800GiB")
    assert row["status"] == "meets" and row["weights_format"] == fit["weights_format"]
    _, roomy = _cli("fit", MODEL, "--device", device, "--memory", "800GiB")
    assert roomy["fits"] is True and roomy["memory_per_device"] == row["memory_per_device"]
    code, infer = _cli("infer", MODEL, "--device", device)
    assert code == 1 and infer["details"]["weights_format"] == fit["weights_format"]
    req = tmp_path / "job.yaml"
    req.write_text(f"version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {{name: {MODEL}}}\n"
                   f"    traffic: {{concurrency: {{typical: 1, peak: 1}}}}\n    resources: {{device: {device}}}\n")
    done = run_cli("plan", str(req), "--no-alternatives")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{fit['weights_format']}, llamacpp) on {device}" in done.stdout and "DOES NOT FIT" in done.stdout


def test_the_fits_at_hint_is_the_format_and_figure_models_fits_on_gives() -> None:
    """With memory for a smaller rung only, fit's hint names the rung `models --fits-on` picks, at its figure."""
    code, fit = _cli("fit", MODEL, "--device", "rtx-4090", "--memory", "400GiB")
    row = _fits_on("rtx-4090", "400GiB")
    assert code == 1 and fit["fits_at"] is not None and row["status"] == "meets"
    assert fit["fits_at"]["weights"] == row["weights_format"] != fit["weights_format"]
    assert fit["fits_at"]["memory_per_device"] == row["memory_per_device"]


def test_python_and_web_give_the_cli_answer(client) -> None:
    done = run_cli("fit", MODEL, "--device", "rtx-4090", "--json")
    assert done.returncode == 1
    r = client.post("/api/v1/fit", json={"model": MODEL, "device": "rtx-4090"})
    assert r.status_code == 200 and r.text == done.stdout
    py = llmsizer.fit(MODEL, "rtx-4090")
    cli = json.loads(done.stdout)
    assert (py.fits, py.weights_format, py.memory_per_device) == (False, cli["weights_format"],
                                                                  cli["memory_per_device"])


def test_a_format_llamacpp_cannot_run_named_stays_bad_input(client) -> None:
    line = cli_error_line("fit", MODEL, "--device", "rtx-4090", "--engine", "llamacpp", "--weights", "fp8-block")
    assert "fp8-block" in line and "GGUF" in line
    r = client.post("/api/v1/fit", json={"model": MODEL, "device": "rtx-4090", "engine": "llamacpp",
                                         "weights": "fp8-block"})
    assert r.status_code == 400 and r.json()["detail"] == line


def test_a_model_llamacpp_is_not_modelled_for_names_the_engine_that_runs_it() -> None:
    """The one architecture class the code knows llama.cpp's serving is not modelled for: an encoder-decoder (T5,
    estimate/model_warnings.py refuse_engine). With no engine named it is answered on transformers; named, one line
    naming transformers."""
    code, fit = _cli("fit", "t0_3b", "--device", "rtx-4090")
    assert code == 0 and fit["engine"] == "transformers"
    line = cli_error_line("fit", "t0_3b", "--device", "rtx-4090", "--engine", "llamacpp")
    assert "--engine transformers" in line
