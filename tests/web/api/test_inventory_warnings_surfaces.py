"""probe21 D6 + D7: the inventory reader's own warnings (a node's RAM below its devices' memory) on every surface
that shows an inventory, with the device memory every other command uses.

D6: `capacity check` and `show` warned "ram: 1.00 GiB is less than the 4 x l40s's ...", but the web's inventory
editor (PUT /capacity/inventory) saved the same text answering ``warnings: []`` and the console listed nothing:
only the bookings' disagreements were passed on. Now one list (provider/disagree.py ``inventory_warnings``).
D7: the figure was 4 x the vendor's 48 GB (192.00 GiB); an L40S offers 46068 MiB as its driver reports it (the
independent truth here: a real `nvidia-smi -q` on an L40S, tests/fixtures/real_outputs/nvidia-smi-q/l40s.txt,
"FB Memory Usage / Total"), the figure fit and the plan budget with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from web_api_helpers import ROOT, run_cli

from llmsizer.units import MiB, format_bytes

pytest.importorskip("fastapi")
pytest.importorskip("sqlalchemy")

INVENTORY = """\
version: 1
sites: [{id: s1}]
nodes:
  - id: l40s-serve
    site: s1
    device: l40s
    devices: 4
    ram: 1 GiB
    pools: [serving]
"""
LINE = 8  # the ram: line


def _l40s_driver_bytes() -> int:
    text = (ROOT / "tests/fixtures/real_outputs/nvidia-smi-q/l40s.txt").read_text()
    m = re.search(r"FB Memory Usage\s*\n\s*Total\s*:\s*(\d+) MiB", text)
    assert m is not None
    return int(m.group(1)) * MiB


def _said(source: str) -> str:
    four = format_bytes(4 * _l40s_driver_bytes())
    assert four == "179.95 GiB"  # not 4 x 48 GB = 192.00 GiB
    return (f"{source}:{LINE}: nodes[0] 'l40s-serve': ram: 1.00 GiB is less than the 4 x l40s's {four} of device "
            "memory: odd for a GPU server (weights are read through host memory to be loaded); check the value")


def test_every_surface_says_the_readers_warning(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    db = str(tmp_path / "b.db")
    want = _said(str(inv))
    show = run_cli("capacity", "show", "--inventory", str(inv), "--db", db)
    assert show.returncode == 0 and f"warning: {want}" in show.stderr.splitlines()
    req = ROOT / "examples" / "lora-finetune-and-chat.yaml"
    check = run_cli("capacity", "check", str(req), "--inventory", str(inv), "--no-db", "--now", "2025-09-01")
    assert check.returncode in (0, 1) and f"warning: {want}" in check.stdout.splitlines()
    server = tmp_path / "server-inventory.yaml"
    server.write_text("sites: [{id: s1}]\nnodes: [{id: n, site: s1, device: l40s, devices: 4, pools: [serving]}]\n")
    with TestClient(create_app(provider=ProviderConfig(inventory=str(server), db=db))) as c:
        r = c.put("/api/v1/capacity/inventory", json={"inventory": INVENTORY})
        assert r.status_code == 200, r.text
        assert r.json()["warnings"] == [_said("inventory.yaml")]  # the editor's own file name, as its errors say
        flags = c.get("/api/v1/capacity/console").json()["flags"]
    # the console names the provider's inventory and the line, never the file's path on the server
    assert flags == [_said("the provider's inventory, line").replace(f"line:{LINE}", f"line {LINE}")]
    assert str(tmp_path) not in " ".join(flags)


def test_no_warning_when_the_ram_holds_the_devices_memory(tmp_path: Path) -> None:
    """180 GiB is below the vendor's 4 x 48 GB but above the 179.95 GiB the devices offer: no warning now."""
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY.replace("ram: 1 GiB", "ram: 180 GiB"))
    show = run_cli("capacity", "show", "--inventory", str(inv), "--db", str(tmp_path / "b.db"))
    assert show.returncode == 0 and "ram:" not in show.stderr
