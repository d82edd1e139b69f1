"""The console's list of bookings the inventory disagrees with and each booking's plan (static/js/console_flags.js,
probe10 defects 1 and 6, provider9 #6): fed the console's real answer (GET /api/v1/capacity/console through the app,
with a node renamed under a booking and a maintenance window over another), it renders the server's words verbatim,
which are `capacity show`'s warnings and row figures (the CLI run on the same files), and the inventory editor's save
line carries the save's warnings. Run through node; skipped where node is not installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("sqlalchemy")

SRC = Path(__file__).resolve().parents[2] / "src"
FLAGS_JS = SRC / "llmsizer" / "web" / "static" / "js" / "console_flags.js"
INVENTORY = ("sites: [{id: s1}]\nstorage: [{id: fs, site: s1, capacity: 1 PB}]\n"
             "nodes: [{id: serve-01, site: s1, device: a100-pcie-80gb, devices: 1, pools: [serving]},\n"
             "        {id: serve-02, site: s1, device: a100-pcie-80gb, devices: 1, pools: [serving]}]\n")
REQUEST = """\
version: 1
title: t{k}
jobs:
  - name: chat-{k}
    kind: inference
    model: {{name: llama-3.1-8b}}
    precision: bf16
    engine: vllm
    traffic: {{concurrency: {{typical: 2}}, context: {{typical: 2k}}}}
    service: {{duration: 10 days}}
    resources: {{device: a100-pcie-80gb, count: 1, nodes: 1}}
    start: 2030-10-01
"""


def _node(script: str) -> object:
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return json.loads(out)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_console_lists_what_the_api_flags(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    cfg = ProviderConfig(inventory=str(inv), db=str(tmp_path / "b.db"))
    with TestClient(create_app(provider=cfg)) as c:
        ids = []
        for k in range(2):
            r = c.post("/api/v1/capacity/book", json={"request": REQUEST.format(k=k), "state": "held"})
            (b,) = r.json()["reservations"]
            ids.append((b["id"], b["nodes"][0]))
        assert [n for _, n in ids] == ["serve-01", "serve-02"]  # one device each
        (a, _), (b, _) = ids
        edited = INVENTORY.replace("id: serve-01", "id: serve-1") + (
            "maintenance: [{start: 2030-10-03T06:00, end: 2030-10-03T08:00, nodes: [serve-02]}]\n")
        saved = c.put("/api/v1/capacity/inventory", json={"inventory": edited}).json()
        view = c.get("/api/v1/capacity/console").json()
    script = (f"import {{ flagLines, planned, savedLine }} from {json.dumps(FLAGS_JS.as_uri())};\n"
              f"const view = {json.dumps(view)};\n"
              f"console.log(JSON.stringify([flagLines(view), view.reservations.map(planned), "
              f"savedLine({json.dumps(saved)})]));")
    lines, plans, said = _node(script)
    # the page renders the server's words verbatim, and those are what `capacity show` warns with, word for word
    # (provider9 #6: before, console_flags.js worded the lines itself)
    assert lines == view["flags"] and len(lines) == 2
    show = subprocess.run([sys.executable, "-m", "llmsizer", "capacity", "show", "--inventory", str(inv), "--db",
                           str(tmp_path / "b.db")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert show.returncode == 0, show.stderr
    warned = [x[len("warning: "):] for x in show.stderr.splitlines() if x.startswith("warning: ") and (
        "booking(s)" in x or "maintenance window" in x)]
    # the same findings in the same words; the remedy in the console's words (store.orphan_remedy web=True): the
    # viewer may be a requester, so no server path or command (test_web_capacity_probe10b)
    assert [w.split("; the chart")[0] for w in warned] == [w.split("; the chart")[0] for w in lines]
    assert warned[1] == lines[1] and str(inv) in warned[0] and str(tmp_path) not in json.dumps(view)
    assert "the console's inventory editor" in lines[0] and "llmsizer capacity" not in lines[0]
    # and they name what happened: the renamed node under booking a, the window over booking b
    assert f"node 'serve-01' holds live booking(s) {a}: the inventory has no such node (removed or renamed)" in lines[0]
    assert f"booking {b} (chat-1, inference) on node 'serve-02' runs across the provider's maintenance window " \
           "2030-10-03 06:00-2030-10-03 08:00: its request agreed to no maintenance window" in lines[1]
    # each booking's plan: the text `capacity show` prints on its row
    rows = {x.split()[0]: x for x in show.stdout.splitlines()[1:] if x.startswith("  ") and len(x.split()) > 2}
    assert [p for p in plans] == [r["figures_text"] for r in view["reservations"]]
    for r, p in zip(view["reservations"], plans, strict=True):
        assert p.startswith("1 x ") and f"  {p}  " in rows[r["id"]], (p, rows)
    assert said.startswith("inventory saved: 2 node(s), 1 site(s)") and len(saved["warnings"]) == 2
    assert said.endswith(f"; warning: {saved['warnings'][0]}; warning: {saved['warnings'][1]}")
