"""fit's "does not fit; fits at X" hint searches what `models --fits-on` searches. Before (main dd7d3994)
`models deepseek-r1 --fits-on rtx-4090` offered Q2_K with the experts of 57 layers in host memory while
`fit deepseek-r1 --device rtx-4090` (exit 1) gave no hint: fit's hint tried only formats that fit wholly on the
GPUs. Now both ask one function (estimate/format_search.py ``experts_in_host_at``). The truth each hint is checked
against: `models --fits-on`'s own answer for the same device and flags, and `fit` rerun with the flags the hint
prints (the auto-fit's --n-cpu-moe), whose own verdict and memory must agree.

And a checkpoint the device's default engine cannot run (DeepSeek-R1's FP8 block scales on a V100: vLLM needs
compute capability 7.5) with no engine or format named is answered on llama.cpp (its default GGUF quant,
``gguf_stand_in``), the reason stated; an engine or format named that the device cannot run stays exit 2."""

from __future__ import annotations

import pytest

import llmsizer
from cli_capture import run, run_json

MODEL = "deepseek-r1"


def _fits_on_host(device: str, *flags: str) -> dict:
    code, data = run_json("models", MODEL, "--fits-on", device, *flags)
    (m,) = data["models"]
    # the row is rejected as it stands; with the host memory given and checked it fits with experts in host memory,
    # which models --fits-on counts as fitting (exit 0, as fit --auto answers FITS), else exit 1
    checked = m["experts_in_host"] is not None and m["experts_in_host"]["host_memory_checked"]
    assert code == (0 if checked else 1) and m["status"] == "rejected" and m["experts_in_host"] is not None
    return m["experts_in_host"]


@pytest.mark.parametrize("device", ["rtx-4090", "h100-sxm", "v100-sxm2-32gb"])
def test_fit_hint_is_models_fits_on_experts_in_host(device: str) -> None:
    host = _fits_on_host(device)
    code, fit = run_json("fit", MODEL, "--device", device)
    at = fit["fits_at"]
    assert code == 1 and fit["fits"] is False and at is not None
    assert at["experts_in_host"] == host  # the same answer, every figure
    assert at["weights"] == host["weights"] and at["memory_per_device"] == host["memory_per_device"]
    assert at["engine"] == "llamacpp" and at["same_engine"] is (fit["engine"] == "llamacpp")
    # the flags printed: rerunning fit with them fits, at the hint's GPU memory
    fmt = host["weights"].removeprefix("gguf:")
    _, out, _ = run("fit", MODEL, "--device", device)
    engine = "" if at["same_engine"] else "--engine llamacpp "
    # (the auto-fit's layer placement under fit's own aliases: -ngl, -sm, -ts, --n-cpu-moe)
    flags = host["flags"]
    placement = [w for k, v in zip(flags, flags[1:], strict=False) if k in ("-ngl", "-sm", "-ts", "--n-cpu-moe")
                 for w in (k, v)]
    assert f"--n-cpu-moe {host['n_cpu_moe']}" in " ".join(placement)
    rerun = f"{engine}--weights {fmt} {' '.join(placement)}"
    assert f"(rerun with {rerun})" in out and "host memory" in out
    code, again = run_json("fit", MODEL, "--device", device, *rerun.split())
    assert code == 0 and again["fits"] is True and again["memory_per_device"] == host["memory_per_device"]


def test_host_memory_given_is_checked_as_models_fits_on_checks_it() -> None:
    host = _fits_on_host("rtx-4090", "--host-memory", "256GiB")
    code, fit = run_json("fit", MODEL, "--device", "rtx-4090", "--host-memory", "256GiB")
    assert code == 1 and fit["fits_at"]["experts_in_host"] == host and host["host_memory_checked"] is True
    assert host["host_bytes"] <= 256 * 2**30
    _, out, _ = run("fit", MODEL, "--device", "rtx-4090", "--host-memory", "256GiB")
    assert "within the host memory given" in out
    # too little host RAM for any rung: neither surface claims it fits
    code, data = run_json("models", MODEL, "--fits-on", "rtx-4090", "--host-memory", "64GiB")
    assert data["models"][0]["experts_in_host"] is None
    assert run_json("fit", MODEL, "--device", "rtx-4090", "--host-memory", "64GiB")[1]["fits_at"] is None


def test_python_carries_the_cli_hint() -> None:
    r = llmsizer.fit(MODEL, "rtx-4090")
    _, cli = run_json("fit", MODEL, "--device", "rtx-4090")
    assert r.fits is False and r.fits_at == cli["fits_at"]
    assert f"--n-cpu-moe {cli['fits_at']['experts_in_host']['n_cpu_moe']}" in str(r)


def test_a_dense_model_gets_no_experts_hint() -> None:
    code, fit = run_json("fit", "llama-3.1-405b-instruct", "--device", "rtx-4090")
    assert code == 1 and fit["fits_at"] is None


def test_v100_default_engine_refusal_answers_on_llamacpp() -> None:
    code, fit = run_json("fit", MODEL, "--device", "v100-sxm2-32gb")
    assert code == 1 and fit["engine"] == "llamacpp"
    engine = next(a for a in fit["memory"]["assumptions"] if a["name"] == "engine")
    assert engine["default"] is True and "vLLM refuses fp8-block" in engine["why"] and "llama.cpp" in engine["why"]
    weights = next(a for a in fit["memory"]["assumptions"] if a["name"] == "weights")
    assert weights["default"] is True and weights["value"] == fit["weights_format"]
    # the default is the first rung models --fits-on walks: with room for it, its pick at its figure
    _, roomy = run_json("fit", MODEL, "--device", "v100-sxm2-32gb", "--memory", "800GiB")
    _, data = run_json("models", MODEL, "--fits-on", "v100-sxm2-32gb", "--memory", "800GiB")
    (row,) = data["models"]
    assert roomy["fits"] is True and row["status"] == "meets"
    assert (row["weights_format"], row["memory_per_device"]) == (roomy["weights_format"], roomy["memory_per_device"])


@pytest.mark.parametrize("flags", [["--weights", "fp8-block"], ["--engine", "vllm"]])
def test_v100_named_engine_or_format_it_cannot_run_stays_bad_input(flags: list[str]) -> None:
    code, _, err = run("fit", MODEL, "--device", "v100-sxm2-32gb", *flags)
    assert code == 2 and "vLLM refuses fp8-block" in err and len(err.strip().splitlines()) == 1
