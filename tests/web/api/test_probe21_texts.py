"""probe21 C1 and C2: error texts that named the wrong thing.

C1: a typo in a training job's ``method`` (``qlroa``) was refused, then read as the default 'full', so a second
line said "peft: ... method is 'full'", a value the user never wrote. The method's own line now stands alone, on
every surface (request check and plan exit 2; the web's 400 with the same lines; Python's RequestError); a real
``method: full`` with peft settings still hears the peft line.
C2: PUT /capacity/inventory refused a node's ``memory:`` key naming ``"field": "hardware_file"`` (the flag its
advice mentions); every other inventory error names ``"inventory"``, the body's field at fault."""

from __future__ import annotations

from pathlib import Path

import pytest
from web_api_helpers import run_cli

from llmsizer.request import RequestError
from llmsizer.request.reader import parse_request

pytest.importorskip("fastapi")

REQUEST = """\
version: 1
title: t
jobs:
  - name: ft
    kind: training
    model: {name: qwen3-32b}
    method: qlroa
    purpose: style
    baseline_tried: true
    peft: {rank: 16, alpha: 32}
    dataset: {tokens: 200M tokens, sensitivity: internal}
    resources: {device: h100-sxm, count: 1}
"""
METHOD = "r.yaml:7: job 'ft' (training): method: unknown value 'qlroa'; choose one of: full, lora, dora, qlora; " \
         "did you mean 'qlora'?"
PEFT = "r.yaml:10: job 'ft' (training): peft: parameter-efficient settings are given but method is 'full'; set " \
       "method to lora, dora or qlora, or remove peft"


def _lines(done) -> list[str]:
    return [ln.removeprefix("llmsizer: error: ").removesuffix(" (see --help)") for ln in done.stderr.splitlines()]


@pytest.mark.parametrize("method, want", [("qlroa", [METHOD]), ("full", [PEFT])])
def test_a_refused_method_is_said_once(client, tmp_path: Path, method: str, want: list[str]) -> None:
    text = REQUEST.replace("method: qlroa", f"method: {method}")
    (tmp_path / "r.yaml").write_text(text)
    for argv in (("request", "check", "r.yaml"), ("plan", "r.yaml")):
        done = run_cli(*argv, cwd=tmp_path)
        assert done.returncode == 2 and _lines(done) == want
    for route in ("/api/v1/request/check", "/api/v1/plan"):
        r = client.post(route, json={"request": text, "filename": "r.yaml"})
        assert r.status_code == 400 and r.json()["errors" if len(want) > 1 else "detail"] == \
            (want if len(want) > 1 else want[0]) and r.json()["field"] == "request"
    with pytest.raises(RequestError) as e:
        parse_request(text, source="r.yaml")
    assert e.value.errors == want


INVENTORY = """\
sites: [{id: s1}]
nodes:
  - {id: n, site: s1, device: l40s, devices: 4, pools: [serving], memory: 48 GiB}
"""


def test_an_inventory_error_names_the_inventory_field(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    bad = tmp_path / "inventory.yaml"
    bad.write_text(INVENTORY)
    done = run_cli("capacity", "show", "--inventory", "inventory.yaml", "--db", str(tmp_path / "b.db"), cwd=tmp_path)
    assert done.returncode == 2
    (line,) = _lines(done)
    assert "unknown key 'memory'" in line and "--hardware-file" in line  # the advice names a flag
    server = tmp_path / "server.yaml"
    server.write_text("sites: [{id: s1}]\nnodes: [{id: n, site: s1, device: l40s, devices: 4, pools: [serving]}]\n")
    with TestClient(create_app(provider=ProviderConfig(inventory=str(server), db=str(tmp_path / "w.db")))) as c:
        r = c.put("/api/v1/capacity/inventory", json={"inventory": INVENTORY})
    assert r.status_code == 400 and r.json()["field"] == "inventory" and r.json()["detail"] == line
