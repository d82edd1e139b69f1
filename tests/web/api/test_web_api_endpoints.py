"""Every endpoint of /api/v1, including bad input: problem+json naming the field, the body and upload limits, the
time limit, no traceback, no server-side path, the security headers."""

from __future__ import annotations

import json
import struct
import sys
import time

import pytest
from web_api_helpers import run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


PROBLEM = "application/problem+json"
JSON = {"content-type": "application/json"}
RAW = {"content-type": "application/octet-stream"}


def _problem(r, status: int, field: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM
    p = r.json()
    assert p["status"] == status and p["type"] == "about:blank" and p["detail"]
    assert "Traceback" not in r.text and 'File "' not in r.text
    if field is not None:
        assert p.get("field") == field, p
    return p


def test_index_says_version_limits_and_whether_hub_ids_work(client):
    from llmsizer import __version__
    r = client.get("/api/v1")
    assert r.status_code == 200
    d = r.json()
    assert d["version"] == __version__ and d["api"] == "v1"
    assert d["limits"] == {"body_bytes": 1_000_000, "upload_bytes": 32 << 20, "time_limit_s": 30.0}
    assert isinstance(d["hub"], bool)


def test_every_route_is_in_the_openapi_document(client, app):
    doc = client.get("/api/v1/openapi.json").json()
    api = {r.path for r in app.routes if getattr(r, "path", "").startswith("/api/v1")} - {"/api/v1/openapi.json"}
    assert api <= set(doc["paths"]), api - set(doc["paths"])
    infer = doc["paths"]["/api/v1/infer"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    props = infer["properties"]
    # the CLI's long options with - written _; the model fields; nothing that names a server file
    assert {"kv_dtype", "context", "concurrency", "max_context", "model", "config", "model_file"} <= set(props)
    assert "hardware_file" not in props and "json" not in props and "help" not in props
    from llmsizer.specs import ENGINES
    assert props["engine"]["enum"] == list(ENGINES)
    assert props["max_context"]["type"] == "boolean"
    fit = doc["paths"]["/api/v1/fit"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert fit["required"] == ["device"]


# ------------------------------------------------------------------------------------------------- bad bodies

def test_a_body_that_is_not_json_is_415_or_400(client):
    _problem(client.post("/api/v1/infer", content=b'{"model": "llama-3.1-8b"}',
                         headers={"content-type": "text/plain"}), 415)
    p = _problem(client.post("/api/v1/infer", content=b'{"model": "llama-3.1-8b",\n "context": }', headers=JSON),
                 400)
    assert "not valid JSON (line 2" in p["detail"]
    _problem(client.post("/api/v1/infer", json=["llama-3.1-8b"]), 400)
    p = _problem(client.post("/api/v1/infer", content=b"[" * 100_000 + b"]" * 100_000, headers=JSON), 400)
    assert "nests 100000 levels deep" in p["detail"]


@pytest.mark.parametrize("body, field, words", [
    ({"model": "llama-3.1-8b", "context": {"tokens": 8}}, "context", "got an object"),
    ({"model": "llama-3.1-8b", "hardware_file": "/etc/passwd"}, "hardware_file", "names a file on the server"),
    ({"model": "llama-3.1-8b", "help": True}, "help", "openapi"),
    ({"model": "llama-3.1-8b", "Context": 8}, "Context", "not a field name"),
    ({"model": "llama-3.1-8b", "--context": 8}, "--context", "not a field name"),
    ({"model": 8}, "model", "a string"),
    ({"model": "llama-3.1-8b", "config": {"model_type": "llama"}}, "config", "not both"),
    ({"config": ["not", "an", "object"]}, "config", "JSON object"),
    ({"config": {"model_type": "llama"}, "config_name": "../../etc"}, "config_name", "no folder"),
    ({"model_file": "sha256:0000"}, "model_file", "upload the header again"),
])
def test_bad_fields_name_the_field(client, body, field, words):
    p = _problem(client.post("/api/v1/infer", json=body), 400, field)
    assert words in p["detail"]


def test_a_config_without_model_type_is_the_readers_message(client):
    p = _problem(client.post("/api/v1/infer", json={"config": {"hidden_size": 8}, "config_name": "x"}), 400)
    assert p["detail"] == "x/config.json: config has no 'model_type'"


def test_an_unknown_query_parameter_is_the_cli_unrecognized_argument(client):
    p = _problem(client.get("/api/v1/hardware?knd=gpu"), 400, "knd")
    # as typed on a command line, `--knd gpu` (was `--knd=gpu`: the word the API hands argparse)
    assert p["detail"].startswith("unrecognized arguments: --knd gpu; did you mean '--kind'?")


@pytest.mark.parametrize("body", [{"rnk": 8}, {"method": "lora", "rank_x": 8}, {"rnk": [1, 2]}, {"rnk": True}])
def test_an_unknown_body_field_is_the_cli_line_as_typed(client, body):
    # was "unrecognized arguments: --rnk=8; ...": the CLI, typed `--rnk 8`, says "--rnk 8"
    p = _problem(client.post("/api/v1/train", json={"model": "llama-3.2-1b", **body}), 400)
    argv = ["train", "llama-3.2-1b"]
    for key, value in body.items():
        for v in value if isinstance(value, list) else [value]:
            argv += ["--" + key.replace("_", "-")] + ([] if v is True else [str(v)])
    cli = run_cli(*argv)
    assert cli.returncode == 2 and cli.stderr.replace(" (see --help)", "") == f"llmsizer: error: {p['detail']}\n", (cli.stderr, p["detail"])


@pytest.mark.parametrize(("counted", "named"), [({"count": 8}, "--count"), ({"gpus": 8}, "--gpus")])
def test_the_device_count_is_named_by_the_flag_given(client, counted, named):
    # was "--gpus (8) must be a multiple ..." for `fit --train --count 8 --tp 3`: the user typed --count
    body = {"model": "llama-3.1-8b", "train": True, "device": "h100-sxm", "tp": 3, **counted}
    p = _problem(client.post("/api/v1/fit", json=body), 400, next(iter(counted)))
    flag, value = next(iter(counted.items()))
    cli = run_cli("fit", "llama-3.1-8b", "--train", "--device", "h100-sxm", "--tp", "3", f"--{flag}", str(value))
    assert cli.returncode == 2 and cli.stderr.replace(" (see --help)", "") == f"llmsizer: error: {p['detail']}\n", cli.stderr
    assert p["detail"].startswith(f"{named} (8) must be a multiple of --tp"), p["detail"]


def test_a_value_cannot_smuggle_another_option(client):
    # passed as --weights=VALUE: the whole string is the value of --weights, never an option of its own
    p = _problem(client.post("/api/v1/infer", json={"model": "llama-3.1-8b", "weights": "--hardware-file=/etc/x"}),
                 400)
    cli = run_cli("infer", "llama-3.1-8b", "--weights=--hardware-file=/etc/x")
    line = cli.stderr.replace(" (see --help)", "").removeprefix("llmsizer: error: ").rstrip("\n")
    # the CLI's reason word for word; the CLI names the flag, the web the field (web/problems.py web_detail)
    assert cli.returncode == 2 and line.startswith("argument --weights: "), cli.stderr
    assert p["detail"] == "field 'weights': " + line.removeprefix("argument --weights: ")
    assert "weight format" in p["detail"] and "/etc/x" in p["detail"]


# ---------------------------------------------------------------------------------------------------- limits

def test_a_body_over_1_mb_is_413_whether_announced_or_streamed(client):
    big = json.dumps({"model": "llama-3.1-8b", "pad": "x" * 1_000_100}).encode()
    _problem(client.post("/api/v1/infer", content=big, headers=JSON), 413)

    def chunks():  # no Content-Length: the guard counts what arrives
        for i in range(0, len(big), 65536):
            yield big[i:i + 65536]
    _problem(client.post("/api/v1/infer", content=chunks(), headers=JSON), 413)
    # just under the limit is read (and refused for its unknown field, not its size)
    ok = json.dumps({"model": "llama-3.1-8b", "pad": "x" * 999_000}).encode()
    _problem(client.post("/api/v1/infer", content=ok, headers=JSON), 400, "pad")


def test_the_time_limit_answers_503(monkeypatch):
    from fastapi.testclient import TestClient

    import llmsizer.cli.infer_cmd as infer_cmd
    from llmsizer.web.app import create_app
    real = infer_cmd.estimate_inference

    def slow(*a, **k):
        time.sleep(1.5)
        return real(*a, **k)
    monkeypatch.setattr(infer_cmd, "estimate_inference", slow)
    with TestClient(create_app(time_limit=0.2), raise_server_exceptions=False) as c:
        t = time.monotonic()
        p = _problem(c.post("/api/v1/infer", json={"model": "llama-3.1-8b"}), 503)
        assert time.monotonic() - t < 1.4  # answered at the limit, not when the work ended
    assert "time limit" in p["detail"]


def test_an_internal_error_is_a_500_problem_without_its_traceback(client, monkeypatch, caplog):
    import llmsizer.cli.infer_cmd as infer_cmd

    def broken(*a, **k):
        raise RuntimeError("secret detail at /srv/llmsizer/internal.py")
    monkeypatch.setattr(infer_cmd, "estimate_inference", broken)
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b"})
    p = _problem(r, 500)
    assert "secret" not in r.text and "internal.py" not in r.text and "RuntimeError" not in r.text
    assert r.headers["x-content-type-options"] == "nosniff"  # the guard's headers on errors too
    assert "internal error" in p["detail"]
    assert "secret detail" in caplog.text  # the server's log keeps what the answer leaves out


def test_unknown_routes_and_methods_are_problems(client):
    _problem(client.get("/api/v1/nothing-here"), 404)
    _problem(client.get("/api/v1/infer"), 405)
    _problem(client.delete("/api/v1/models"), 405)


# ------------------------------------------------------------------------------------------ no server paths

def test_a_model_name_is_never_read_as_a_server_path(client, tmp_path):
    import readers_helpers as H
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(H.LLAMA_CONFIG))
    assert run_cli("infer", str(cfg), "--json").returncode == 0  # the CLI reads a path it is given...
    p = _problem(client.post("/api/v1/infer", json={"model": str(cfg)}), 400, "model")  # ...the API never does
    assert p["detail"].startswith("unknown model")
    for name in ("/etc/passwd", "../../../etc/passwd", str(tmp_path)):
        assert _problem(client.post("/api/v1/inspect", json={"model": name}), 400)["detail"].startswith("unknown")


def test_a_request_file_naming_a_server_path_is_refused_at_its_line(client, tmp_path):
    import readers_helpers as H
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(H.LLAMA_CONFIG))
    text = run_cli("request", "new").stdout
    text = text.replace("name: llama-3.1-8b", f"name: {cfg}", 1)
    assert str(cfg) in text
    p = _problem(client.post("/api/v1/request/check", json={"request": text}), 400, "request")
    assert any("model.name" in e and "unknown model" in e for e in p["errors"])


def test_a_hub_id_without_the_hub_extra_is_a_400_naming_the_extra(client, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if the extra were not installed
    p = _problem(client.post("/api/v1/infer", json={"model": "some-org/some-new-model", "hub": True}), 400, "hub")
    assert "pip install 'llmsizer[hub]'" in p["detail"]
    # without hub=true a Hub id is only looked up in the catalog (offline first)
    p = _problem(client.post("/api/v1/infer", json={"model": "some-org/some-new-model"}), 400, "model")
    assert p["detail"].startswith("unknown model")


# ------------------------------------------------------------------------------------------------ model files

def _upload(client, kind: str, name: str, size: int, data: bytes, headers=RAW):
    return client.post("/api/v1/model-files", params={"kind": kind, "name": name, "size": size}, content=data,
                       headers=headers)


def test_uploads_are_checked_before_and_while_parsing(client):
    _problem(_upload(client, "gguf", "a.gguf", 10, b"GGUF", headers=JSON), 415)
    _problem(_upload(client, "ggml", "a.gguf", 10, b"GGUF"), 400, "kind")
    _problem(_upload(client, "gguf", "../../etc/passwd", 10, b"GGUF"), 400, "name")
    _problem(_upload(client, "gguf", "a/b.gguf", 10, b"GGUF"), 400, "name")
    p = _problem(client.post("/api/v1/model-files", params={"kind": "gguf", "name": "a.gguf"}, content=b"GGUF",
                             headers=RAW), 400, "size")
    assert "size" in p["detail"]
    p = _problem(_upload(client, "gguf", "a.gguf", 100, b"NOTAGGUF" * 4), 400)
    assert p["detail"].startswith("a.gguf: not a GGUF file")
    p = _problem(_upload(client, "safetensors", "m.safetensors", 100, struct.pack("<Q", 500) + b"{}"), 400)
    assert p["detail"] == "m.safetensors: header length 500 is larger than the file (100 bytes)"


def test_an_upload_over_its_cap_is_413():
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    with TestClient(create_app(upload_limit=1000), raise_server_exceptions=False) as c:
        _problem(_upload(c, "gguf", "a.gguf", 5000, b"G" * 1001), 413)
        _problem(_upload(c, "gguf", "a.gguf", 5000, b"G" * 1000), 400)  # read, and not a GGUF


def test_a_gguf_header_cut_short_says_so(client, tmp_path):
    pytest.importorskip("gguf")
    import readers_helpers as H
    path = tmp_path / "m.gguf"
    H.llama_gguf().write(path)
    data = path.read_bytes()
    p = _problem(_upload(client, "gguf", "m.gguf", len(data), data[:200]), 400)
    assert p["detail"].startswith("m.gguf: truncated GGUF header")
    assert f"only the first 200 of the file's {len(data):,} bytes were sent" in p["detail"]
    p = _problem(_upload(client, "gguf", "m.gguf", 300, data), 400)  # more bytes than the file has
    assert "file size" in p["detail"]


def test_model_file_combinations(client, tmp_path):
    pytest.importorskip("gguf")
    pytest.importorskip("safetensors")
    import readers_helpers as H
    path = tmp_path / "m.gguf"
    H.llama_gguf().write(path)
    data = path.read_bytes()
    gguf_id = _upload(client, "gguf", "m.gguf", len(data), data).json()["model_file"]
    folder = tmp_path / "f"
    (w,) = H.write_folder(folder, H.LLAMA_CONFIG, H.random_arrays(H.llama_shapes(H.LLAMA_CONFIG)))
    st = w.read_bytes()
    st_id = _upload(client, "safetensors", "model.safetensors", len(st), st).json()["model_file"]
    _problem(client.post("/api/v1/infer", json={"model_file": gguf_id, "model": "llama-3.1-8b"}), 400, "model_file")
    _problem(client.post("/api/v1/infer", json={"model_file": st_id}), 400, "model_file")
    # the same upload twice is one entry
    assert _upload(client, "gguf", "m.gguf", len(data), data).json()["model_file"] == gguf_id
    r = client.post("/api/v1/inspect", json={"model": "llama-3.1-8b", "model_file": [st_id]})
    assert r.status_code == 200  # catalog architecture + the file's exact bytes (inspect reports both)
    assert r.json()["file_weights"]["bytes"] == H.safetensors_data_size(w)


def test_the_upload_store_forgets_the_oldest():
    from llmsizer.web.problems import Problem
    from llmsizer.web.sources import Uploads
    store = Uploads(keep=2)
    ids = [store.add("safetensors", f"{i}.safetensors", 8 + 2, struct.pack("<Q", 2) + b"{}").id for i in range(3)]
    assert len(set(ids)) == 3
    with pytest.raises(Problem):
        store.get(ids[0])
    assert store.get(ids[2]).name == "2.safetensors"


# ---------------------------------------------------------------------------------------------- headers, pages

def test_security_headers_on_answers_errors_and_pages(client):
    for r in (client.get("/api/v1"), client.post("/api/v1/infer", json={"model": "x"}), client.get("/"),
              client.get("/api/v1/nothing")):
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
    assert client.get("/api/v1").headers["cache-control"] == "no-store"


def test_the_template_is_yaml_and_the_schema_json(client):
    r = client.get("/api/v1/request/template")
    assert r.headers["content-type"].startswith("text/yaml") and "jobs:" in r.text
    assert client.get("/api/v1/request/schema").json()["type"] == "object"


def test_the_published_openapi_document_is_the_one_served(client):
    from web_api_helpers import ROOT
    published = json.loads((ROOT / "docs" / "openapi.json").read_text("utf-8"))
    assert client.get("/api/v1/openapi.json").json() == published  # regenerate: scripts/gen_docs.py


def _header(n_tensors: int) -> bytes:
    """A safetensors header of ``n_tensors`` one-byte U8 tensors (the format: 8-byte length, JSON)."""
    entries = {f"t{i}": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(n_tensors)}
    raw = json.dumps(entries).encode()
    return struct.pack("<Q", len(raw)) + raw


def test_the_upload_store_keeps_a_bounded_number_of_tensor_records():
    from llmsizer.web.problems import Problem
    from llmsizer.web.sources import Uploads
    store = Uploads(keep=32, keep_tensors=5)
    first = store.add("safetensors", "a.safetensors", len(_header(3)) + 3, _header(3))
    second = store.add("safetensors", "b.safetensors", len(_header(3)) + 3, _header(3))
    assert len(second.tensors) == 3
    with pytest.raises(Problem):  # 6 records > 5: the oldest upload is forgotten
        store.get(first.id)
    assert store.get(second.id) is second


def test_bodies_read_at_once_are_bounded_together():
    """Two requests whose bodies arrive slowly, at once: past the shared limit the second is a 503, and what was
    counted is given back when each answer is sent."""
    import anyio

    from llmsizer.web.guards import Guard

    async def app(scope, receive, send):
        message = await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": message["body"]})

    guard = Guard(app, body_limit=100, buffered_limit=10)
    statuses: list[int] = []

    async def one() -> None:
        chunks = [{"type": "http.request", "body": b"x" * 3, "more_body": i < 2} for i in range(3)]

        async def receive():
            await anyio.sleep(0.01)
            return chunks.pop(0)

        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])
        scope = {"type": "http", "path": "/api/v1/infer", "method": "POST", "headers": []}
        await guard(scope, receive, send)

    async def both() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
    anyio.run(both)
    assert sorted(statuses) == [200, 503]
    assert guard.buffered == 0
    anyio.run(one)  # alone again: fits
    assert statuses[-1] == 200 and guard.buffered == 0


def test_an_error_with_several_problems_lists_each_as_the_cli_prints_them():
    from llmsizer.errors import InputError
    from llmsizer.web.problems import from_error
    p = from_error(InputError("inventory.yaml:3: node 'a': memory: not a size\ninventory.yaml:9: node 'b': count: 0"))
    assert p.status == 400 and p.detail == "inventory.yaml:3: node 'a': memory: not a size"
    assert p.errors == ["inventory.yaml:3: node 'a': memory: not a size", "inventory.yaml:9: node 'b': count: 0"]


@pytest.mark.parametrize("key", ["hardware_file", "hardware_fil", "hardware", "hardware_f"])
def test_no_spelling_of_a_denied_option_reads_a_server_file(client, tmp_path, key):
    """argparse accepts a prefix of an option on the command line; the API takes fields in full only, so no
    prefix of --hardware-file makes the server read a file."""
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps({"devices": [{"id": "web-secret-gpu", "name": "Secret", "kind": "gpu",
                                           "memory": "80GiB", "memory_bandwidth": "2000 GB/s"}]}))
    listed = run_cli("hardware", "list", "--hardware-file", str(hw), "--json")
    assert "web-secret-gpu" in listed.stdout  # the file is a good hardware file: the CLI reads it
    for r in (client.get(f"/api/v1/hardware?{key}={hw}"),
              client.post("/api/v1/fit", json={"model": "llama-3.1-8b", "device": "web-secret-gpu", key: str(hw)})):
        _problem(r, 400, key)
        assert "web-secret-gpu" not in r.text


@pytest.mark.parametrize("name, ok", [("модель-Q4_K_M.gguf", True), ("my model (1).gguf", True), ("../x.gguf", False),
                                      ("a\\b.gguf", False), ("..", False), ("x\x1b[31m.gguf", False),
                                      ("a\u202eb.gguf", False), ("x" * 201, False)])
def test_a_file_name_is_a_label_never_a_path(name, ok):
    from llmsizer.web.problems import Problem
    from llmsizer.web.sources import check_label
    if ok:
        assert check_label(name, "name") == name
    else:
        with pytest.raises(Problem):
            check_label(name, "name")
