"""engine_version is one InferenceWorkload field on every surface: the Python API (fit, recommend_inference,
estimate_inference), the CLI (infer, fit, recommend), a request file (its ``engine_version`` key, read by `plan`) give
the same speed for the same stated release, and refuse a bad one with the same line (exit 2).

The release is vLLM 0.5 (the V0 engine): its host time per decode step is serial, added to every step
(estimate/engines.py STEP_HOST, efficiency.VLLM_V0_STEP_SECONDS), so a surface that dropped the version would answer
the current release's overlapped step instead -- each check below also asserts the two differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import run_cli
from llmsizer import fit
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.inference import estimate_inference
from llmsizer.models import load_model
from llmsizer.recommend import recommend_inference

ROOT = Path(__file__).resolve().parents[2]
MODEL, DEVICE, VERSION = "qwen3-0.6b", "h100-sxm", "0.5"
WORK = dict(context=640, output_tokens=128, concurrency=4)
FLAGS = ["--engine", "vllm", "--context", "640", "--output-tokens", "128", "--concurrency", "4"]
BAD_LINE = "llmsizer: error: engine_version must look like 0.19 or 0.19.1, got 'latest'"

REQUEST = """version: 1
title: engine version
jobs:
  - name: serving
    kind: inference
    model:
      name: qwen3-0.6b
    engine: {engine}
{version}    quantization: none
    traffic:
      concurrency: 4
      context: 640
      output: 128
    resources:
      device: h100-sxm
      count: 1
"""


def cli_json(*args: str) -> dict:
    r = run_cli(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def request_file(tmp_path: Path, version: str | None, engine: str = "vllm") -> Path:
    p = tmp_path / "request.yaml"
    line = f'    engine_version: "{version}"\n' if version is not None else ""
    p.write_text(REQUEST.format(engine=engine, version=line))
    return p


@pytest.fixture(scope="module")
def python_answer() -> tuple[float, float]:
    """(decode step seconds, output tokens/s in total) of the Python API at VERSION, checked against the rule."""
    spec = load_model(MODEL)
    r = fit(spec, DEVICE, engine="vllm", engine_version=VERSION, **WORK)
    now = fit(spec, DEVICE, engine="vllm", **WORK)
    v06 = fit(spec, DEVICE, engine="vllm", engine_version="0.6", **WORK)
    assert r.speed is not None and r.speed.decode is not None and v06.speed is not None
    assert v06.speed.decode is not None and now.tokens_per_second_total is not None
    # V0 and 0.6-0.7 each add their measured serial host step to the same device step (eq. 7)
    assert r.speed.decode.seconds - E.VLLM_V0_STEP_SECONDS.expected == pytest.approx(
        v06.speed.decode.seconds - E.VLLM_V06_STEP_SECONDS.expected)
    assert r.tokens_per_second_total is not None and r.tokens_per_second_total < now.tokens_per_second_total
    return r.speed.decode.seconds, r.tokens_per_second_total


def test_cli_fit_gives_the_python_number(python_answer: tuple[float, float]) -> None:
    step, total = python_answer
    d = cli_json("fit", MODEL, "--device", DEVICE, *FLAGS, "--engine-version", VERSION)
    assert d["speed"]["decode"]["seconds"] == step and d["tokens_per_second_total"] == total
    assert cli_json("fit", MODEL, "--device", DEVICE, *FLAGS)["tokens_per_second_total"] != total


def test_recommend_gives_the_fit_number(python_answer: tuple[float, float]) -> None:
    _, total = python_answer

    def h100(options: list) -> dict:
        return next(o for o in options if o["device"] == DEVICE and o["count"] == 1 and o["weights_format"] == "bf16")

    d = cli_json("recommend", MODEL, *FLAGS, "--engine-version", VERSION, "--top", "100")
    assert h100(d["options"])["tokens_per_second"] == total
    rec = recommend_inference(load_model(MODEL), engine="vllm", engine_version=VERSION, **WORK)
    o = next(o for o in rec.options if o.device == DEVICE and o.count == 1 and o.weights_format == "bf16")
    assert o.tokens_per_second == total
    now = cli_json("recommend", MODEL, *FLAGS, "--top", "100")
    assert h100(now["options"])["tokens_per_second"] != total


def test_plan_of_a_request_file_gives_the_fit_number(tmp_path: Path, python_answer: tuple[float, float]) -> None:
    _, total = python_answer

    def speed(version: str | None) -> dict:
        d = cli_json("plan", str(request_file(tmp_path, version)), "--today", "2026-03-02")
        sec = next(s for s in d["jobs"][0]["sections"] if s["key"] == "speed")
        return {f["key"]: f["value"] for f in sec["figures"]}

    stated, now = speed(VERSION), speed(None)
    assert stated["tps_total_typical"] == total and now["tps_total_typical"] != total
    assert stated["engine_host_seconds_per_step"] == E.VLLM_V0_STEP_SECONDS.expected
    assert now["engine_host_seconds_per_step"] == E.VLLM_V1_HOST_STEP_SECONDS.expected
    text = run_cli("plan", str(request_file(tmp_path, VERSION)), "--today", "2026-03-02")
    assert text.returncode == 0 and f"engine_version {VERSION}" in text.stdout, text.stderr
    md = run_cli("plan", str(request_file(tmp_path, VERSION)), "--today", "2026-03-02", "-o", str(tmp_path / "r.md"))
    assert md.returncode == 0, md.stderr
    ms = f"{E.VLLM_V0_STEP_SECONDS.expected * 1e3:.0f} ms"  # the report's whole milliseconds
    assert f"| engine host time per decode step (vLLM &lt; 0.6 (V0 engine), engine_version {VERSION}) | {ms} |" \
        in (tmp_path / "r.md").read_text()


def test_infer_and_estimate_inference_record_it() -> None:
    """infer answers memory, which the release does not change: the stated version is checked and recorded."""
    d = cli_json("infer", MODEL, *FLAGS, "--engine-version", VERSION)
    a = next(a for a in d["assumptions"] if a["name"] == "engine_version")
    assert a["value"] == VERSION and a["default"] is False and "vLLM < 0.6" in a["why"]
    est = estimate_inference(MODEL, engine="vllm", engine_version=VERSION, **WORK)
    assert est.to_dict()["totals"] == d["totals"]
    assert estimate_inference(MODEL, engine="vllm", **WORK).to_dict()["totals"] == d["totals"]


@pytest.mark.parametrize("command", [
    ["fit", MODEL, "--device", DEVICE, *FLAGS],
    ["infer", MODEL, *FLAGS],
    ["recommend", MODEL, *FLAGS],
])
def test_a_bad_version_is_the_same_line_everywhere(command: list[str]) -> None:
    r = run_cli(*command, "--engine-version", "latest")
    assert r.returncode == 2 and r.stdout == "" and r.stderr == BAD_LINE + "\n", r.stderr


def test_a_bad_version_in_python_and_a_request_file(tmp_path: Path) -> None:
    from llmsizer.errors import InputError
    from llmsizer.specs import InferenceWorkload
    for call in (lambda: InferenceWorkload(engine="vllm", engine_version="latest"),
                 lambda: fit(MODEL, DEVICE, engine="vllm", engine_version="latest"),
                 lambda: estimate_inference(MODEL, engine="vllm", engine_version="latest")):
        with pytest.raises(InputError) as e:
            call()
        assert "llmsizer: error: " + str(e.value) == BAD_LINE
    with pytest.raises(InputError, match="engine_version must be a release such as"):
        InferenceWorkload(engine="vllm", engine_version=0.1)  # type: ignore[arg-type]
    for command in ("plan", "request"):
        args = ["request", "check"] if command == "request" else ["plan"]
        r = run_cli(*args, str(request_file(tmp_path, "latest")))
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "request.yaml:9: job 'serving' (inference): engine_version: must look like 0.19 or 0.19.1, got " \
               "'latest'" in r.stderr
    r = run_cli("plan", str(request_file(tmp_path, VERSION, engine="llamacpp")))
    assert r.returncode == 2 and "engine_version: applies to engine vllm or sglang, not llamacpp" in r.stderr


def test_another_engine_is_refused_on_every_command() -> None:
    line = "llmsizer: error: --engine-version applies to engine vllm or sglang, not llamacpp\n"
    for command in (["fit", MODEL, "--device", "rtx-4090"], ["infer", MODEL]):
        r = run_cli(*command, "--engine", "llamacpp", "--engine-version", VERSION)
        assert r.returncode == 2 and r.stderr == line, r.stderr
    r = run_cli("recommend", MODEL, "--engine-version", VERSION)  # each option may run another engine: named up front
    assert r.returncode == 2 and "--engine-version is a vLLM or SGLang setting, and candidates may each run a different one by default: give --engine vllm or --engine sglang" in r.stderr
