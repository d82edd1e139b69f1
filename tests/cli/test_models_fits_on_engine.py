"""`models --fits-on DEVICE --engine E [--engine-version V]` is `fit` on the same model, device, engine and release:
one answer (the memory per device, the verdict and the speed are fit's for the format it names), and the flags are
refused as `fit` refuses them (an engine setting on another engine, a bad release, a flag without --fits-on)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cli_capture import run
from llmsizer.estimate.fit import fit


def fits_on(*argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run("models", *argv, "--json")
    return code, json.loads(out)


@pytest.mark.parametrize(("query", "device", "engine", "version"), [
    ("qwen3-8b", "h100-sxm", "vllm", None), ("qwen3-8b", "h100-sxm", "vllm", "0.5"),
    ("qwen2.5-7b", "l4", "sglang", None), ("llama-3.1-8b", "rtx-4090", "vllm", None),
    ("qwen3-4b", "rtx-4090", "llamacpp", None)])
def test_each_model_is_what_fit_answers_on_that_engine(query: str, device: str, engine: str,
                                                       version: str | None) -> None:
    argv = [query, "--fits-on", device, "--engine", engine, "--context", "4k", "--concurrency", "4"]
    if version:
        argv += ["--engine-version", version]
    code, data = fits_on(*argv)
    assert code in (0, 1) and data["engine"] == engine and data.get("engine_version") == version
    assert data["models"]
    for m in data["models"]:
        assert m["engine"] == engine, m["id"]
        if m["status"] != "meets":
            continue
        r = fit(m["id"], device, engine=engine, engine_version=version, weights=m["weights_format"], context=4096,
                concurrency=4)
        assert r.fits and r.memory_per_device == m["memory_per_device"]
        assert r.speed is not None and r.speed.tokens_per_second == pytest.approx(m["tokens_per_second"])
        assert r.speed.tokens_per_second_per_user == pytest.approx(m["tokens_per_second_per_user"])


def test_the_release_changes_the_speed_as_it_changes_fits() -> None:
    """vLLM 0.5 ran its host work per decode step serially (estimate/engines.py STEP_HOST): a 0.6B model on an H100
    is host-bound, so the old release is slower, in fit and in the list alike."""
    speeds = {}
    for version in ("0.5", None):
        argv = ["qwen3-0.6b", "--fits-on", "h100-sxm", "--engine", "vllm", "--context", "640", "--concurrency", "4"]
        _, data = fits_on(*argv, *(["--engine-version", version] if version else []))
        (m,) = [m for m in data["models"] if m["id"] == "Qwen/Qwen3-0.6B"]
        r = fit("qwen3-0.6b", "h100-sxm", engine="vllm", engine_version=version, weights=m["weights_format"],
                context=640, concurrency=4)
        assert m["tokens_per_second"] == pytest.approx(r.tokens_per_second_total)
        speeds[version] = m["tokens_per_second"]
    assert speeds["0.5"] < speeds[None]


@pytest.mark.parametrize(("argv", "says"), [
    (["--fits-on", "l4", "--engine", "llamacpp", "--engine-version", "0.10.1"], "--engine-version applies to engine vllm"),
    (["--fits-on", "l4", "--engine-version", "0.10.1"], "--engine-version is a vLLM or SGLang setting"),
    (["--fits-on", "l4", "--engine", "vllm", "--engine-version", "0.5e3"], "engine"),
    (["--engine", "vllm"], "--engine needs --fits-on"),
    (["--context", "8k", "--count", "2"], "--count, --context need --fits-on"),
])
def test_bad_flags_are_refused_in_one_line(argv: list[str], says: str) -> None:
    code, out, err = run("models", "qwen3-0.6b", *argv)
    assert code == 2 and out == "" and says in err and len(err.strip().splitlines()) == 1, err
