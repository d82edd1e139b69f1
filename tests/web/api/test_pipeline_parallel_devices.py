"""Serving pipeline stages by device runtime (specs/workload.py ``refuse_pipeline_engine``): SGLang 0.5.23 has no
TPU backend (the PyPI wheel's srt/arg_groups/fields/device.py lines 24-27: --device 'cuda', 'xpu', 'hpu', 'npu',
'cpu', 'musa'; srt/platforms/ holds no TPU platform), so SGLang on a TPU, with --pp-size or without, is refused in one
line (specs/workload.py ``refuse_sglang_tpu``), the CLI's exit 2 and the web's 400 with the same text; vLLM 0.19.1 hands a TPU to
tpu-inference (vllm/platforms/tpu.py lines 9-15), whose 0.19.0 release runs pipeline stages
(platforms/tpu_platform.py lines 253-262), and neither engine refuses PP on ROCm (vllm/platforms/rocm.py has no
pipeline check; SGLang's check_server_args, lines 3977-3983, asks only for the overlap scheduler off): accepted,
each a replica of T x P devices."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("argv", [
    ("infer", "llama-3.1-70b", "--device", "tpu-v5p", "--engine", "sglang", "--tp", "4", "--pp", "2"),
    ("fit", "llama-3.1-70b", "--device", "tpu-v5p", "--count", "8", "--engine", "sglang", "--tp", "4", "--pp", "2"),
    ("fit", "llama-3.1-70b", "--device", "gcp-ct5lp-hightpu-8t", "--engine", "sglang", "--pp", "2"),
    # without stages too: SGLang serves no TPU at all
    ("infer", "llama-3.1-8b", "--device", "tpu-v5e", "--engine", "sglang"),
    ("fit", "llama-3.1-8b", "--device", "tpu-v5p", "--engine", "sglang"),
    ("fit", "llama-3.1-70b", "--device", "gcp-ct5lp-hightpu-8t", "--engine", "sglang"),
    ("fit", "llama-3.1-8b", "--device", "tpu-v5p", "--engine", "sglang", "--request-rate", "2"),
])
def test_sglang_on_a_tpu_is_one_line(argv: tuple[str, ...]) -> None:
    r = _cli(*argv)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "SGLang has no TPU backend" in lines[0] \
        and "fields/device.py lines 24-27" in lines[0] and "use --engine vllm" in lines[0]


@pytest.mark.parametrize("stages", [{"tp": 4, "pp": 2}, {}])
def test_web_says_the_same_line(client, stages: dict[str, int]) -> None:
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-70b", "device": "tpu-v5p", "engine": "sglang",
                                           **stages})
    assert r.status_code == 400
    flags = [x for k, v in stages.items() for x in (f"--{k}", str(v))]
    cli = _cli("infer", "llama-3.1-70b", "--device", "tpu-v5p", "--engine", "sglang", *flags)
    assert r.json()["detail"] == cli.stderr.strip().removeprefix("llmsizer: error: ")


def test_python_api_refuses_sglang_on_xla() -> None:
    """The workload's own check (the Python API with no device named, gpu_runtime 'xla') says the same line."""
    from llmsizer.errors import InputError
    from llmsizer.specs.workload import SGLANG_TPU_REFUSAL, InferenceWorkload
    with pytest.raises(InputError, match="SGLang has no TPU backend") as e:
        InferenceWorkload(engine="sglang", gpu_runtime="xla")
    assert str(e.value) == SGLANG_TPU_REFUSAL


@pytest.mark.parametrize(("device", "engine"), [("tpu-v5p", "vllm"), ("mi300x", "vllm"), ("mi300x", "sglang")])
def test_accepted_where_the_engine_splits_stages(device: str, engine: str) -> None:
    r = _cli("infer", "llama-3.1-70b", "--device", device, "--engine", engine, "--tp", "4", "--pp", "2", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["details"]
    assert d["devices_per_replica"] == 8 and len(d["pipeline_stages"]) == 2
    # vLLM's split of 80 layers over 2 stages (get_pp_indices), SGLang's the same when they divide evenly
    assert [s["layers"] for s in d["pipeline_stages"]] == [[0, 39], [40, 79]]
