"""A request job naming devices but no engine is served on the engine `fit` takes for those devices (estimate/device.py
``engine_rule``, asked by plan/inference.py ``job_engine``), and a KV cache dtype that engine cannot store is bad
input on `request check`, `plan` and `capacity check` alike: exit 2, one line naming the file, the kv_cache_dtype
line and the job, with `fit --kv-dtype`'s own message.

Independent truth: `fit` of the same model, device, load and KV dtype through the real CLI (its exit code, its
error line, its --json engine and memory).

Before: the plan checked such a job's bad input on transformers (the engine `infer` takes without a device), so on
an RTX 4090 (fit: llama.cpp) q8_0 and fp8_e5m2 were refused as transformers', at the job's line, and fp8 (which
transformers stores, llama.cpp not) passed `request check` (exit 0) and became the plan's 'Cannot be fitted' (exit 1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run, run_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
INVENTORY = EXAMPLES / "provider" / "inventory.yaml"
SURFACES = (("request", "check"), ("plan",), ("capacity", "check"))
KV_LINE = 8  # the line of kv_cache_dtype in REQUEST

REQUEST = """version: 1
jobs:
  - name: chat8
    kind: inference
    model:
      name: llama-3.1-8b
    precision: bf16
    kv_cache_dtype: {kv}
    quantization: "none"
    traffic:
      concurrency: {{typical: 32, peak: 32}}
      context: {{typical: 4096, peak: 4096}}
      output: {{typical: 256, peak: 256}}
{resources}    service:
      duration: 1 month
"""
LOAD = ("--concurrency", "32", "--context", "4096", "--output-tokens", "256")


def _request(tmp_path: Path, kv: str, device: str | None) -> Path:
    f = tmp_path / "r.yaml"
    f.write_text(REQUEST.format(kv=kv, resources=f"    resources:\n      device: {device}\n" if device else ""))
    return f


def _surface(cmd: tuple[str, ...], f: Path) -> tuple[int, str, str]:
    return run(*cmd, str(f), *(("--inventory", str(INVENTORY), "--no-db") if cmd[0] == "capacity" else ()))


@pytest.mark.parametrize("device, kv, engine", [
    ("rtx-4090", "fp8", "llamacpp"),  # transformers stores it, llama.cpp not: was exit 0 / plan ERROR exit 1
    ("rtx-4090", "fp8_e5m2", "llamacpp"),  # was refused as transformers'
    ("h100-sxm", "q8_0", "vllm"),  # was refused as transformers'
])
def test_a_kv_dtype_fits_engine_cannot_store_is_bad_input_everywhere(tmp_path: Path, device: str, kv: str,
                                                                    engine: str) -> None:
    code, out, err = run("fit", "llama-3.1-8b", "--device", device, "--kv-dtype", kv, *LOAD)
    assert code == 2 and not out, err
    line = err.strip().split(": error: ", 1)[1]
    assert line.startswith(f"engine {engine} has no '{kv}' KV cache")
    f = _request(tmp_path, kv, device)
    want = f"{f}:{KV_LINE}: job 'chat8' (inference): kv_cache_dtype: {line}"
    for cmd in SURFACES:
        code, out, err = _surface(cmd, f)
        assert (code, err.strip()) == (2, f"llmsizer: error: {want}"), (cmd, out[-500:])
        assert not out, cmd


def test_a_kv_dtype_fits_engine_stores_is_planned_on_fits_engine_and_answer(tmp_path: Path) -> None:
    code, fit = run_json("fit", "llama-3.1-8b", "--device", "rtx-4090", "--kv-dtype", "q8_0", *LOAD)
    assert code in (0, 1) and fit["engine"] == "llamacpp"
    f = _request(tmp_path, "q8_0", "rtx-4090")
    assert run("request", "check", str(f))[0] == 0  # was exit 2: "engine transformers has no 'q8_0' KV cache"
    code, plan = run_json("plan", str(f))
    job = plan["jobs"][0]
    assert job["hardware"]["engine"] == fit["engine"]
    assert job["facts"]["fits"] == fit["fits"]
    assert job["facts"]["memory_need"] == fit["memory_per_device"]
    assert code == (0 if fit["fits"] else 1)


def test_with_no_devices_the_kv_dtype_is_the_searchs_as_recommends(tmp_path: Path) -> None:
    """No devices named: the plan searches hardware, each option on its own engine, as `recommend --kv-dtype`
    answers (it was exit 2, refused as transformers')."""
    code, rec = run_json("recommend", "llama-3.1-8b", "--kv-dtype", "q8_0", *LOAD)
    assert code == 0 and rec["chosen"] is not None
    f = _request(tmp_path, "q8_0", None)
    assert run("request", "check", str(f))[0] == 0
    code, plan = run_json("plan", str(f))
    assert code == 0, plan["checks"]
    assert plan["jobs"][0]["hardware"]["engine"] == rec["chosen"]["engine"] == "llamacpp"
