"""``GET /api/v1/models/fits-on`` ("what fits my machine", issue #16): its body is byte for byte what the real CLI
(a subprocess) prints for ``llmsizer models --fits-on DEVICE ... --json``, with the CLI's exit code; bad input is a
400 naming the field, with the CLI's one line."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

CASES = [
    ({"fits_on": "rtx-4090", "context": "8k"}, ["--fits-on", "rtx-4090", "--context", "8k"]),
    ({"fits_on": "apple-m3-max-36gb", "concurrency": "2", "query": "qwen"},
     ["qwen", "--fits-on", "apple-m3-max-36gb", "--concurrency", "2"]),
    ({"fits_on": "g6.xlarge", "context": "32k", "concurrency": "4"},  # an instance: its device and count
     ["--fits-on", "g6.xlarge", "--context", "32k", "--concurrency", "4"]),
    ({"fits_on": "rtx-3090", "count": "2", "query": "70b"}, ["70b", "--fits-on", "rtx-3090", "--count", "2"]),
    # two whole instances, as fit --count 16 takes them (refused, exit 2, before)
    ({"fits_on": "aws-p5.48xlarge", "count": "16", "query": "llama-3.1-70b"},
     ["llama-3.1-70b", "--fits-on", "aws-p5.48xlarge", "--count", "16"]),
    ({"fits_on": "h100-sxm", "query": "qwen3-0", "engine": "vllm", "engine_version": "0.5"},
     ["qwen3-0", "--fits-on", "h100-sxm", "--engine", "vllm", "--engine-version", "0.5"]),
    ({"fits_on": "rtx-4090", "query": "qwen3", "memory": "12GiB", "headroom": "0.3"},  # fit --memory --headroom
     ["qwen3", "--fits-on", "rtx-4090", "--memory", "12GiB", "--headroom", "0.3"]),
    ({"fits_on": "intel-xeon-spr-8ch", "query": "qwen2.5-0", "memory": "16GiB"},  # no sourced memory: given
     ["qwen2.5-0", "--fits-on", "intel-xeon-spr-8ch", "--memory", "16GiB"]),
    ({"fits_on": "rtx-4090", "query": "qwen3-next", "host_memory": "64 GB"},  # fit --auto --host-memory
     ["qwen3-next", "--fits-on", "rtx-4090", "--host-memory", "64 GB"]),
    ({"fits_on": "a100-pcie-80gb", "query": "qwen3-32b", "count": "4", "gpus_per_node": "2"},  # fit --gpus-per-node
     ["qwen3-32b", "--fits-on", "a100-pcie-80gb", "--count", "4", "--gpus-per-node", "2"]),
]


@pytest.mark.parametrize("params, argv", CASES, ids=[f"{c[0]['fits_on']}-{i}" for i, c in enumerate(CASES)])
def test_fits_on_is_the_cli_json(client, params, argv):
    r = client.get("/api/v1/models/fits-on", params=params)
    cli = run_cli("models", *argv, "--json")
    assert cli.returncode in (0, 1), cli.stderr
    assert r.status_code == 200, r.text
    assert r.text == cli.stdout
    assert r.headers["x-llmsizer-exit-code"] == str(cli.returncode)
    # and the same answer as the model list's fits_on parameter
    assert client.get("/api/v1/models", params=params).text == r.text


def test_fits_on_answers_ranked_information_the_page_needs(client):
    data = client.get("/api/v1/models/fits-on", params={"fits_on": "h100-sxm", "context": "8k"}).json()
    meets = [m for m in data["models"] if m["status"] == "meets"]
    assert meets and all(m["weights_format"] and m["tokens_per_second_per_user"] > 0 for m in meets)
    assert any(m["status"] == "rejected" and m["reasons"] for m in data["models"])  # DeepSeek-R1 on one H100


@pytest.mark.parametrize("params, field, cli_argv", [
    ({"fits_on": "no-such-card"}, None, ["--fits-on", "no-such-card"]),
    ({"fits_on": "rtx-4090", "context": "lots"}, "context", ["--fits-on", "rtx-4090", "--context", "lots"]),
    ({"fits_on": "rtx-4090", "count": "two"}, "count", ["--fits-on", "rtx-4090", "--count", "two"]),
    ({"fits_on": "rtx-4090", "memory": "12"}, "memory", ["--fits-on", "rtx-4090", "--memory", "12"]),
    ({"fits_on": "rtx-4090", "memory": "1KiB"}, None, ["--fits-on", "rtx-4090", "--memory", "1KiB"]),
    ({"fits_on": "rtx-4090", "headroom": "1"}, "headroom", ["--fits-on", "rtx-4090", "--headroom", "1"]),
    # an instance brings its own count, or whole instances of it, as `fit --device` says: answered on all 8 GPUs
    # (exit 0) before
    ({"fits_on": "aws-p5.48xlarge", "count": 2}, None, ["--fits-on", "aws-p5.48xlarge", "--count", "2"]),
])
def test_bad_input_is_the_cli_line(client, params, field, cli_argv):
    r = client.get("/api/v1/models/fits-on", params=params)
    cli = run_cli("models", *cli_argv, "--json")
    assert cli.returncode == 2
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/problem+json")
    detail = r.json()["detail"]
    assert "Traceback" not in r.text
    if field:
        assert r.json()["field"] == field
        # the CLI's reason word for word; the CLI names the flag, the web the field (web/problems.py web_detail)
        assert detail.startswith(f"field '{field}': ") and f"argument --{field}: " in cli.stderr, (detail, cli.stderr)
        detail = detail.removeprefix(f"field '{field}': ")
    assert detail in cli.stderr, (detail, cli.stderr)


@pytest.mark.parametrize("params", [{}, {"fits_on": " "}])
def test_fits_on_is_required(client, params):
    r = client.get("/api/v1/models/fits-on", params=params)
    assert r.status_code == 400 and r.json()["field"] == "fits_on"


def test_a_hardware_file_cannot_be_named(client):
    r = client.get("/api/v1/models/fits-on", params={"fits_on": "rtx-4090", "hardware_file": "/etc/passwd"})
    assert r.status_code == 400 and r.json()["field"] == "hardware_file"


# ------------------------------------------------------------------ your own hardware entry, pasted (POST)

MY_BOX = """devices:
  - id: my-box
    name: My box
    kind: gpu
    memory: 24GiB
    memory_bandwidth: 936 GB/s
    owned: true
"""
MY_NODE_JSON = ('{"devices": [{"id": "lab-node", "name": "Lab node", "kind": "gpu", "memory": "48GiB", '
                '"memory_bandwidth": "864 GB/s"}], "instances": [{"id": "lab-2x", "name": "Two lab GPUs", '
                '"provider": "owned", "device": "lab-node", "device_count": 2}]}')


@pytest.mark.parametrize("name, text, on, extra", [
    ("my-box.yaml", MY_BOX, "my-box", {"context": "8k"}),
    ("lab.json", MY_NODE_JSON, "lab-2x", {"query": "qwen", "concurrency": "2"}),
    ("override.yaml", "devices:\n  - id: rtx-4090\n    memory_bandwidth: 2000 GB/s\n", "rtx-4090", {}),  # changed
], ids=["yaml-device", "json-instance", "override"])
def test_a_pasted_hardware_entry_is_the_cli_with_that_file(client, tmp_path, name, text, on, extra):
    """The body's ``hardware`` text answers as ``--hardware-file NAME`` does on a file holding it (run where the
    file is, so the source is named the same; its date is the file's day, today, as the API's)."""
    (tmp_path / name).write_text(text)
    argv = [*([extra["query"]] if "query" in extra else []), "--fits-on", on, "--hardware-file", name,
            *[a for k, v in extra.items() if k != "query" for a in (f"--{k}", v)], "--json"]
    cli = run_cli("models", *argv, cwd=tmp_path)
    assert cli.returncode in (0, 1), cli.stderr
    r = client.post("/api/v1/models/fits-on", json={"fits_on": on, "hardware": text, "hardware_name": name, **extra})
    assert r.status_code == 200, r.text
    assert r.text == cli.stdout and r.headers["x-llmsizer-exit-code"] == str(cli.returncode)
    catalog = client.get("/api/v1/models/fits-on", params={"fits_on": "rtx-4090", **extra}).text
    assert r.text != catalog  # the entry was used (for the override: 2,000 GB/s, not the catalog's 1,008)


@pytest.mark.parametrize("text, on", [
    (MY_BOX.replace("24GiB", "lots"), "my-box"),  # a value that is not a number with a unit
    ("devices: [{name: no id}]\n", "my-box"),  # an entry without id
    ("devices: {id: x}\n", "x"),  # not a list
    ("nodes: []\n", "x"),  # an unknown top-level key
    ("devices: [a, b\n", "x"),  # not YAML
    (MY_BOX, "my-bx"),  # a name that is not there: the CLI's closest names
    (MY_BOX.replace("24GiB", ".nan"), "my-box"),  # not finite: the CLI stopped with a traceback before
    (MY_BOX.replace("936 GB/s", "1e300 TB/s"), "my-box"),  # past the documented maximum
], ids=["value", "no-id", "not-list", "top-key", "yaml", "unknown-name", "nan", "huge"])
def test_a_bad_pasted_entry_is_a_400_with_the_cli_line(client, tmp_path, text, on):
    (tmp_path / "hardware.yaml").write_text(text)
    cli = run_cli("models", "--fits-on", on, "--hardware-file", "hardware.yaml", "--json", cwd=tmp_path)
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1
    r = client.post("/api/v1/models/fits-on", json={"fits_on": on, "hardware": text})
    assert r.status_code in (400, 404) and r.headers["content-type"] == "application/problem+json"
    assert "llmsizer: error: " + r.json()["detail"] + "\n" == cli.stderr.replace(" (see --help)", "")
    if r.json()["detail"].startswith("hardware file"):
        assert r.json()["field"] == "hardware"


def test_pasted_entry_fields_are_checked(client):
    for body, field in (({"fits_on": "x", "hardware": 3}, "hardware"),
                        ({"fits_on": "x", "hardware": MY_BOX, "hardware_name": "../etc/x.yaml"}, "hardware_name"),
                        ({"hardware": MY_BOX}, "fits_on"),
                        ({"fits_on": "my-box", "hardware": MY_BOX, "hardware_file": "/etc/passwd"}, "hardware_file")):
        r = client.post("/api/v1/models/fits-on", json=body)
        assert r.status_code == 400 and r.json()["field"] == field, r.text


def test_fits_on_is_the_python_answer(client):
    """One function answers the three: the web's body is ``llmsizer.models_that_fit(...).to_dict()`` as the CLI
    writes it (cli.json_out), for the same options."""
    import llmsizer
    from llmsizer.cli.common import json_text
    r = client.get("/api/v1/models/fits-on", params={"fits_on": "rtx-4090", "query": "qwen3", "context": "8k",
                                                       "concurrency": "2", "headroom": "0.15"})
    py = llmsizer.models_that_fit("rtx-4090", "qwen3", context=8192, concurrency=2, headroom=0.15)
    assert r.status_code in (200,), r.text
    assert r.text == json_text(py.to_dict())
    assert r.headers["x-llmsizer-exit-code"] == ("0" if py.fitting else "1")


@pytest.mark.parametrize("path, params", [
    ("/api/v1/models/fits-on", {"fits_on": "detected"}),
    ("/api/v1/models", {"fits_on": "Detected"}),
])
def test_the_server_does_not_detect_its_own_machine(client, path, params):
    """'detected' is the machine the CLI runs on; the server refuses it (a 400 naming the field) rather than run
    nvidia-smi/lscpu on itself and answer for its own hardware."""
    r = client.get(path, params=params)
    assert r.status_code == 400, r.text
    assert "fits_on" in r.text and "hardware detect" in r.text


def test_fit_device_detected_is_refused_by_the_server(client):
    r = client.post("/api/v1/fit", json={"model": "qwen2.5-0.5b", "device": "detected"})
    assert r.status_code == 400, r.text
    assert "'device'" in r.text
