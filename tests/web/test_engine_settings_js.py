"""The calculator's "Copy as CLI command" and "Download as request YAML" (static/js/state.js cliCommand, requestYaml)
with settings of the serving tab's Engine settings section: the command carries each setting's flag (the section's
data-flag, from the CLI's parser; false: its --no- form) and ``infer`` answers it as the API answers the same fields;
the YAML puts the settings a request file takes (request/fields.py engine_settings, served as /pages/choices.json's
request_engine_settings) under ``engine_settings:``, fit_target under ``resources:``, --tp / --pp as the job's
tensor_parallel / pipeline_parallel / data_parallel (``plan`` of the file gives the page's total), the others as comments naming
their flag, and the request reader accepts the file and reads the values picked (``request check`` and
``load_request``: the independent truth of what a request says). Run through node (the pages' own module); skipped
where node is not installed."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

STATE_JS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "web" / "static" / "js" / "state.js"
MODEL = "qwen2.5-0.5b"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def _flags() -> dict[str, str]:
    """Each Engine settings control's data-flag, as the page the server renders states it."""
    from llmsizer.web.pages import PAGE_HTML
    page = PAGE_HTML["/"].decode()
    return dict(re.findall(r'name="([a-z0-9_]+)" data-flag="([^"]+)"', page))


def _node(call: str) -> str:
    script = (f"import {{ apiFields, cliCommand, requestYaml }} from {json.dumps(STATE_JS.as_uri())};\n"
              f"process.stdout.write({call});")
    return subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                          check=True).stdout


def _yaml(fields: dict[str, Any], engine: dict[str, Any], common: dict[str, str]) -> str:
    from llmsizer.web.pages import CHOICES
    arg = {"fields": engine, "flags": _flags(), "taken": CHOICES["request_engine_settings"]}
    return _node(f"requestYaml('infer', {json.dumps(MODEL)}, {json.dumps({**fields, **engine})}, "
                 f"{json.dumps(common)}, {json.dumps(CHOICES['defaults'])}, {{}}, null, {json.dumps(arg)})")


# the serving fields, the engine settings (as the calculator's typed() gives them), the budget
CASES = [
    ({"engine": "sglang", "context": "8k", "concurrency": "4"},
     {"mem_fraction_static": "0.5", "max_num_seqs": "8", "allow_long_context": True, "max_num_batched_tokens": "4096"},
     {"memory": "80GiB"}),
    ({"engine": "llamacpp", "weights": "q4_0", "context": "8k", "concurrency": "4"},
     {"n_gpu_layers": "10", "kv_unified": False, "fit_target": "512MiB", "infer_gpus": "2", "tensor_split": "3,1",
      "n_ubatch": "1024"},
     {"memory": "24GiB"}),
    # --tp (the serving tab's tensor_parallel, web/pages.py ENGINE_COUNTS): the job's tensor_parallel, pinned on
    # tp devices of the kind infer --memory takes (resources.device gpu, count 2)
    # --ubatch (n_ubatch) and --block-size (paged_block_size): controls named by their dest, a flag of another name;
    # the API takes the flag's (before, the page posted n_ubatch and got "unrecognized arguments: --n-ubatch")
    ({"engine": "vllm", "context": "8k", "concurrency": "4"},
     {"tensor_parallel": "2", "max_num_seqs": "8", "paged_block_size": "32"},
     {"memory": "24GiB"}),
]


@pytest.mark.parametrize(("fields", "engine", "common"), CASES, ids=[c[0]["engine"] for c in CASES])
def test_the_copied_command_is_the_apis_answer(fields: dict[str, Any], engine: dict[str, Any],
                                               common: dict[str, str]) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from cli_capture import run_cli
    from llmsizer.web.app import create_app
    command = _node(f"cliCommand('infer', {json.dumps(MODEL)}, {json.dumps({**fields, **engine, **common})}, [], "
                    f"{json.dumps(_flags())})")
    for name, value in engine.items():  # each setting's own flag (the CLI's, not the field's name)
        flag = _flags()[name]
        assert (f" --no-{flag[2:]}" if value is False else f" {flag}") in command, (name, command)
    done = run_cli(*shlex.split(command)[1:], "--json")
    assert done.returncode in (0, 1), done.stderr
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        body = json.loads(_node(f"JSON.stringify(apiFields({json.dumps({**fields, **engine, **common})}, "
                                f"{json.dumps(_flags())}))"))
        r = client.post("/api/v1/infer", json={"model": MODEL, **body})  # the body the page posts
    assert r.status_code == 200, r.text
    assert r.json() == json.loads(done.stdout)


@pytest.mark.parametrize(("fields", "engine", "common"), CASES, ids=[c[0]["engine"] for c in CASES])
def test_engine_settings_in_the_request_yaml(tmp_path: Path, fields: dict[str, Any], engine: dict[str, Any],
                                             common: dict[str, str]) -> None:
    from cli_capture import run_cli
    from llmsizer import load_request
    from llmsizer.web.pages import CHOICES
    text = _yaml(fields, engine, common)
    path = tmp_path / "request.yaml"
    path.write_text(text)
    done = run_cli("request", "check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr + text
    (job,) = load_request(path).jobs
    got = job.engine_settings.fields()
    for name, value in engine.items():
        if name in CHOICES["request_engine_settings"]:
            want = value if isinstance(value, bool) else tuple(map(float, value.split(","))) if "," in value \
                else float(value)
            assert got[name] == want, (name, got.get(name), text)
        elif name == "fit_target":  # llama.cpp --fit-target: the job's resources
            assert job.resources.fit_target == 512 * 2**20, text
        elif name == "infer_gpus":  # llama.cpp --gpus: the job's device count
            assert job.resources.count == int(value), text
        elif name == "tensor_parallel":  # --tp: the job's own field, on that many devices (one replica)
            assert job.tensor_parallel == int(value) and job.resources.count == int(value), text
            assert job.resources.device == "gpu", text
        else:  # not a request setting: a comment with its flag, not a key
            flag = _flags()[name]
            assert f"    # {flag} {value}: not a request setting (llmsizer infer only)" in text, text
            assert name not in got, (name, got[name])


# --tp / --pp on the serving tab (web/pages.py ENGINE_MAIN): the downloaded YAML names them as the job's
# tensor_parallel / pipeline_parallel on tp x pp devices, and `plan` of that file gives the page's total (POST
# /api/v1/infer with the body the page posts, = infer --tp --pp --json): a device named, and a memory alone
LAYOUTS = [
    ({"engine": "vllm", "context": "8k", "concurrency": "4", "device": "h100"},
     {"tensor_parallel": "2", "pipeline_parallel": "2"}, {}),
    ({"engine": "sglang", "context": "8k", "concurrency": "4", "device": "l40s"},
     {"tensor_parallel": "2"}, {}),
    ({"engine": "vllm", "context": "8k", "concurrency": "4"}, {"tensor_parallel": "2"}, {"memory": "24GiB"}),
    # --dp (data_parallel, web/pages.py ENGINE_MAIN): the job's data_parallel, on tp x dp devices
    ({"engine": "vllm", "context": "8k", "concurrency": "8", "device": "h100"},
     {"tensor_parallel": "2", "data_parallel": "2"}, {}),
]


@pytest.mark.parametrize(("fields", "engine", "common"), LAYOUTS, ids=["vllm-h100-tp2-pp2", "sglang-l40s-tp2",
                                                                       "vllm-memory-tp2", "vllm-h100-tp2-dp2"])
def test_the_layout_in_the_request_yaml_plans_to_the_pages_total(tmp_path: Path, fields: dict[str, Any],
                                                                  engine: dict[str, Any], common: dict[str, str]) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from cli_capture import run_cli
    from llmsizer.web.app import create_app
    text = _yaml(fields, engine, common)
    assert "not a request setting" not in text, text
    tp, pp = int(engine.get("tensor_parallel", 1)), int(engine.get("pipeline_parallel", 1))
    dp = int(engine.get("data_parallel", 1))
    assert f"\n    tensor_parallel: {tp}\n" in text and f"\n      count: {tp * pp * dp}  #" in text, text
    assert (f"\n    pipeline_parallel: {pp}\n" in text) is (pp > 1), text
    assert (f"\n    data_parallel: {dp}\n" in text) is (dp > 1), text
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        body = json.loads(_node(f"JSON.stringify(apiFields({json.dumps({**fields, **engine, **common})}, "
                                f"{json.dumps(_flags())}))"))
        r = client.post("/api/v1/infer", json={"model": MODEL, **body})  # the body the page posts: its #total
    assert r.status_code == 200, r.text
    page = r.json()
    path = tmp_path / "request.yaml"
    path.write_text(text)
    out = tmp_path / "report.json"
    done = run_cli("plan", str(path), "-o", str(out))
    assert done.returncode in (0, 1), done.stdout + done.stderr + text
    (job,) = json.loads(out.read_text())["jobs"]
    assert job["hardware"]["count"] == tp * pp * dp, job["hardware"]
    assert job["hardware"].get("pipeline_parallel", 1) == pp, job["hardware"]
    assert job["hardware"].get("data_parallel", 1) == dp, job["hardware"]
    memory = {f["key"]: f["value"] for s in job["sections"] if s["key"] == "memory" for f in s["figures"]}
    assert memory["memory_per_device"] == page["totals"]["device"]["bytes"], (memory, page["totals"])
    assert memory["fits"] is page["details"]["fits"]
    # vLLM's pool is the same whatever the layout: the layout's own figures, this workload's need, the weights each
    # device holds (the binding stage's share, / TP) and the pool's room, are the page's too
    d = page["details"]
    assert (memory["need_peak"], memory["weights"], memory["kv_room"]) == (
        d["workload_bytes"], d["weights_bytes"], d["max_concurrency_at_context"]), (memory, d)
