"""llama.cpp's --fit-target (bytes kept free on each GPU instead of a --headroom share; estimate/verdict.py
``margin_rule`` eq. 1') is taken wherever --headroom is: `fit`, `infer`, and `recommend`, `models --fits-on` and a
request file's ``resources`` (issue #12/#16). Before, recommend and `models --fits-on` had no such flag (argparse
exit 2) and a request file refused the key, so a llama.cpp budget asked with a 2 GiB target had no answer there.

Truth: llama.cpp's --fit-target keeps that many bytes of each GPU free (ggml-org/llama.cpp@0c1e57098,
common/arg.cpp ``-fitt/--fit-target``; the fit succeeds when free memory - projected use >= target), so the budget is
the device memory less the target, the same on every surface that takes the flag."""

from __future__ import annotations

import json

import pytest

from cli_capture import run
from llmsizer.plan import make_plan
from llmsizer.request import RequestError, parse_request

MODEL, DEVICE, TARGET = "llama-3.1-8b", "rtx-4090", 2 * 2**30


def _json(*argv: str) -> tuple[int, dict]:
    code, out, err = run(*argv, "--json")
    assert out, err
    return code, json.loads(out)


def _fit(target: str, weights: str) -> dict:
    _, f = _json("fit", MODEL, "--device", target, "--engine", "llama.cpp", "--fit-target", "2GiB",
                 "--weights", weights.removeprefix("gguf:"))
    return f


def test_recommend_and_fit_agree_on_the_budget() -> None:
    code, rec = _json("recommend", MODEL, "--engine", "llama.cpp", "--fit-target", "2GiB")
    assert code == 0 and rec["chosen"] is not None
    (given,) = [a for a in rec["assumptions"] if a["name"] in ("headroom", "fit_target")]
    assert given["name"] == "fit_target" and given["default"] is False
    gpu = [o for o in rec["options"] if o["device_kind"] == "gpu"]
    assert gpu
    for o in gpu[:3]:
        f = _fit(o["target"], o["weights_format"])
        assert o["budget_per_device"] == f["budget_per_device"], o["target"]
        assert o["memory_per_device"] == f["memory_per_device"]
        assert "2.00 GiB fit_target" in " ".join(o["reasons"])
    # the target decides the budget: llama.cpp's own default (1024 MiB) leaves 1 GiB more
    _, default = _json("recommend", MODEL, "--engine", "llama.cpp")
    same = {o["target"]: o for o in default["options"]}
    o = next(o for o in gpu if o["target"] in same)
    assert same[o["target"]]["budget_per_device"] - o["budget_per_device"] == TARGET - 2**30


def test_models_fits_on_takes_the_target() -> None:
    _, data = _json("models", "--fits-on", DEVICE, "--engine", "llama.cpp", "--fit-target", "2GiB")
    assert data["fit_target"] == TARGET
    f = _fit(DEVICE, "q8_0")
    budgets = {m["budget_per_device"] for m in data["models"] if m["budget_per_device"] is not None}
    assert budgets == {f["budget_per_device"]}
    _, plain = _json("fit", MODEL, "--device", DEVICE, "--engine", "llama.cpp", "--headroom", "0")
    assert f["budget_per_device"] == plain["budget_per_device"] - TARGET  # memory less the target


def _request(resources: str, engine: str = "llamacpp", kind: str = "inference") -> str:
    if kind == "training":
        return ("version: 1\njobs:\n  - name: ft\n    kind: training\n    model: {name: llama-3.2-3b}\n"
                "    method: lora\n    dataset: {tokens: 10M tokens}\n"
                f"    handover: {{model_destination: s3://b/ft}}\n    resources: {{{resources}}}\n")
    return ("version: 1\njobs:\n"
            f"  - name: chat\n    kind: inference\n    model: {{name: {MODEL}}}\n    engine: {engine}\n"
            f"    resources: {{{resources}}}\n"
            "    traffic:\n      concurrency: {typical: 1, peak: 1}\n      context: {typical: 4k, peak: 4k}\n"
            "      output: {typical: 256, peak: 256}\n")


def test_a_request_fit_target_is_fits() -> None:
    plan = make_plan(parse_request(_request(f"device: {DEVICE}, fit_target: 2GiB"), source="t.yaml"),
                     alternatives=False)
    (job,) = plan.jobs
    _, f = _json("fit", MODEL, "--device", DEVICE, "--engine", "llama.cpp", "--fit-target", "2GiB", "--context", "4k",
                 "--concurrency", "1", "--output-tokens", "256")
    mem = job.section("memory")
    assert mem.value("budget") == f["budget_per_device"]
    assert mem.value("fits") is f["fits"]


@pytest.mark.parametrize("argv, said", [
    (("recommend", MODEL, "--fit-target", "2GiB", "--max-num-seqs", "8"), "no engine reads both"),
    (("recommend", MODEL, "--engine", "llama.cpp", "--fit-target", "2GiB", "--headroom", "0.2"), "not both"),
    (("recommend", MODEL, "--engine", "vllm", "--fit-target", "2GiB"), "applies to engine llamacpp"),
    (("models", "--fit-target", "2GiB"), "--fits-on"),
])
def test_bad_uses_are_one_line_exit_2(argv: tuple[str, ...], said: str) -> None:
    code, _, err = run(*argv)
    assert code == 2 and said in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("resources, engine, kind, said", [
    (f"device: {DEVICE}, fit_target: 2GiB, headroom: 0.2", "llamacpp", "inference", "not both"),
    (f"device: {DEVICE}, fit_target: 2GiB", "vllm", "inference", "applies to engine llamacpp"),
    (f"device: {DEVICE}, fit_target: 2GiB", "llamacpp", "training", "inference jobs"),
    (f"device: {DEVICE}, fit_target: 1 potato", "llamacpp", "inference", "size"),
])
def test_a_request_fit_target_is_checked(resources: str, engine: str, kind: str, said: str) -> None:
    with pytest.raises(RequestError) as e:
        parse_request(_request(resources, engine, kind), source="t.yaml")
    assert "resources.fit_target" in str(e.value) and said in str(e.value), str(e.value)


@pytest.mark.parametrize("argv", [
    ("infer", MODEL, "--engine", "llama.cpp", "--device", "rtx-3090", "--fit-target", "30GiB"),
    ("fit", MODEL, "--engine", "llama.cpp", "--device", "rtx-3090", "--fit-target", "30GiB"),
    ("fit", MODEL, "--engine", "llama.cpp", "--device", "rtx-3090", "--count", "2", "--auto", "--fit-target", "30GiB"),
    ("infer", MODEL, "--engine", "llama.cpp", "--device", "rtx-3090", "--fit-target", "24GiB"),  # equal: nothing left
])
def test_a_fit_target_not_below_the_gpu_memory_is_refused(argv: tuple[str, ...]) -> None:
    """probe27 D4: a --fit-target above the GPU's memory was clamped in silence (fit --auto: 'margin kept free on each
    GPU: 24.00 GiB' with fit_target=30.00 GiB assumed; infer: 'a 0 B budget (24.00 GiB - 30.00 GiB fit_target)').
    The rtx-3090 has 24.00 GiB (fit and infer say so): the workload's check refuses it in one line naming both (exit 2)."""
    code, out, err = run(*argv)
    asked = argv[-1].removesuffix("GiB")
    assert code == 2 and out == "", (code, out)
    assert err.strip().splitlines() == [
        f"llmsizer: error: --fit-target {asked}.00 GiB is not less than the GPU memory 24.00 GiB: it is the memory "
        "kept free on each GPU (llama.cpp --fit-target), which would leave none to use; give less than 24.00 GiB"]
    below = [a if a not in ("30GiB", "24GiB") else "23GiB" for a in argv]
    assert run(*below)[0] in (0, 1)  # below the memory: answered (a verdict)
