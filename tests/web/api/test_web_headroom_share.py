"""The web API's headroom is the CLI's (its parser): a share as 0.1 or "10%", as a request file's `headroom: 10%`
(request/quantities.py parse_share). Before, "10%" was refused by the flag (and so by the API) while request files
read it."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from web_api_helpers import run_cli  # noqa: E402


def test_headroom_as_a_percentage_is_the_clis_answer(client) -> None:
    body = {"model": "llama-3.2-3b", "device": "l4", "headroom": "10%"}
    r = client.post("/api/v1/fit", json=body)
    assert r.status_code == 200, r.text
    cli = run_cli("fit", "llama-3.2-3b", "--device", "l4", "--headroom", "10%", "--json")
    assert cli.returncode == 0 and r.text == cli.stdout and r.json()["headroom"] == pytest.approx(0.1)
    bad = client.post("/api/v1/fit", json={**body, "headroom": "99.5%"})
    assert bad.status_code == 400 and "0.995 is out of range" in bad.json()["detail"]


@pytest.mark.parametrize(("command", "body", "field"), [
    ("infer", {"model": "qwen3-8b", "engine": "vllm", "device": "h100"}, "gpu_memory_utilization"),
    ("infer", {"model": "qwen3-8b", "engine": "sglang", "device": "h100"}, "mem_fraction_static"),
    ("train", {"model": "qwen2.5-0.5b", "device": "h100", "tokens": "1B"}, "utilization"),
])
def test_every_share_field_reads_a_percentage_as_the_cli_does(client, command: str, body: dict, field: str) -> None:
    """The other share-valued fields (session 12): "40%" is 0.4, the CLI's answer byte for byte; "140%" and "abc"
    are the CLI's one line, naming the field."""
    r = client.post(f"/api/v1/{command}", json={**body, field: "40%"})
    assert r.status_code == 200, r.text
    same = client.post(f"/api/v1/{command}", json={**body, field: 0.4})
    assert same.status_code == 200 and same.text == r.text
    argv = [command, body["model"], *[a for k, v in body.items() if k != "model" for a in (f"--{k}", v)]]
    cli = run_cli(*argv, f"--{field.replace('_', '-')}", "40%", "--json")
    assert cli.returncode == 0 and r.text == cli.stdout
    for value, says in (("140%", "1.4 is out of range"), ("abc", "cannot read 'abc' as a share")):
        bad = client.post(f"/api/v1/{command}", json={**body, field: value})
        assert bad.status_code == 400 and says in bad.json()["detail"] and "\n" not in bad.json()["detail"]
        assert bad.json().get("field") == field, bad.json()
