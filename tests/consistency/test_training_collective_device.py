"""A training run's data-parallel collectives on a GPU without peer-to-peer access (the catalog's rtx-4090 row,
``peer_to_peer: false``, NVIDIA/nccl#1127: NCCL stages every transfer through host memory, the calibrated
``host_staged_collective_bandwidth``) and on a hardware-file twin of it under another id that does not state
``peer_to_peer`` (taken to have peer-to-peer access: the device's own link, the catalog's ``pcie4`` at 32 GB/s per
direction for the RTX 4090); a twin that states ``peer_to_peer: false`` gets the RTX 4090's own rule and numbers.

Each answer is its device's own, whichever device was asked first, through the Python API (the memos on the
training-duration path: fit.py ``_TRAINING_CACHE``, training/compose.py ``_MEMO``, duration.py's lru caches) and
through ``recommend --train`` listing both (the recommendation's assumptions are its chosen option's; they were the
first option timed, so a listing whose first option was the RTX 4090 said 4.633 GB/s of a chosen twin timed at 32
GB/s). The twin's rule is said in its assumptions (the id match that decides it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_capture import run_json
from llmsizer.catalog.hardware import _read_builtin
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.efficiency import HOST_STAGED_COLLECTIVE_BANDWIDTH
from llmsizer.estimate.fit import fit_training

REAL = "rtx-4090"  # GeForce RTX 40: no peer-to-peer access (NVIDIA/nccl#1127, comment of 2024-02-22)
TWIN = f"{REAL}-p2p-twin"
PCIE4 = 32e9  # catalog interconnects.json 'pcie4': PCIe Gen4 x16, 32 GB/s per direction (the RTX 4090's link)
RUN = dict(method="full", seq_len=2048, micro_batch=1)


def _hardware(tmp_path: Path, first: int) -> Path:
    """The twin (every field of the catalog GPU, another id) and a 2-GPU box of each, listed in the order ``first``."""
    raw = next(d for d in _read_builtin("accelerators.json")["devices"] if d["id"] == REAL)
    twin = {k: v for k, v in raw.items() if k != "peer_to_peer"}  # a copy that does not state it
    twin.update(id=TWIN, name=f"{raw['name']} (twin)", aliases=[])
    boxes = [{"id": f"box-{d}", "name": f"box {d}", "provider": "mybox", "device": d, "device_count": 2,
              "price": {"value": 1.0, "unit": "USD/h", "source": "user"}} for d in (REAL, TWIN)]
    path = tmp_path / f"hw{first}.json"
    path.write_text(json.dumps({"devices": [twin], "instances": boxes[first:] + boxes[:first]}), encoding="utf-8")
    return path


def _collective(assumptions: list[dict[str, Any]]) -> dict[str, Any]:
    return next(a for a in assumptions if a["name"] == "collective_bandwidth")


@pytest.mark.parametrize("first", [0, 1])
def test_each_device_keeps_its_collective_rule_whichever_came_first(tmp_path: Path, first: int) -> None:
    path = _hardware(tmp_path, first)
    ids = [REAL, TWIN]

    def timed(dev: str) -> dict[str, Any]:
        r = fit_training("llama-3.2-1b", dev, 2, tokens=1e8, hardware_files=[path], **RUN)
        assert r.fits and r.training_time is not None
        return r.training_time

    alone = {}
    for dev in ids:
        clear_caches()
        alone[dev] = timed(dev)
    assert alone[REAL]["step"]["topology"] == "host-staged" and alone[TWIN]["step"]["topology"] == "direct"
    clear_caches()
    for dev in ids[first:] + ids[:first]:
        assert timed(dev) == alone[dev], (ids[first], dev)


@pytest.mark.parametrize("first", [0, 1])
def test_recommend_states_the_chosen_options_collectives(tmp_path: Path, first: int) -> None:
    path = _hardware(tmp_path, first)
    code, rec = run_json("recommend", "llama-3.2-1b", "--train", "--method", "full", "--tokens", "1e8",
                         "--hardware-file", str(path), "--provider", "mybox")
    assert code == 0 and [o["device"] for o in rec["options"]] == [TWIN, REAL]  # same price, the twin is faster
    chosen = _collective(rec["assumptions"])
    assert chosen["value"] == PCIE4, chosen
    assert f"{TWIN} states no peer_to_peer" in chosen["why"]  # why the twin gets the direct link is said
    # and it is the chosen option's own answer (fit --train --tokens on it)
    code, alone = run_json("fit", "llama-3.2-1b", "--train", "--device", f"box-{TWIN}", "--method", "full",
                           "--tokens", "1e8", "--hardware-file", str(path))
    assert code == 0
    # recommend's own rule first (no deadline given: the practical limit stands in for one), then the chosen
    # option's assumptions, as fit --train --tokens states them
    assert rec["assumptions"][0]["name"] == "practical_training_limit"
    assert rec["assumptions"][1:] == alone["training_time"]["assumptions"]
    # the warnings fit says of it: its memory's, then its duration's (FitResult.all_warnings)
    assert rec["warnings"] == list(dict.fromkeys([*alone["warnings"], *alone["training_time"]["warnings"]]))
    code, real = run_json("fit", "llama-3.2-1b", "--train", "--device", f"box-{REAL}", "--method", "full",
                          "--tokens", "1e8", "--hardware-file", str(path))
    assert _collective(real["training_time"]["assumptions"])["value"] == HOST_STAGED_COLLECTIVE_BANDWIDTH.expected


def test_a_twin_stating_no_peer_to_peer_gets_the_rtx_4090s_rule_and_numbers(tmp_path: Path) -> None:
    """A hardware-file copy of the RTX 4090 under another id with ``peer_to_peer: false`` is timed as the RTX 4090
    itself: host-staged collectives at the calibrated bandwidth, the same step and duration (before the field, the
    rule matched catalog ids only and such a twin got the 32 GB/s direct link); the assumption names the file."""
    raw = next(d for d in _read_builtin("accelerators.json")["devices"] if d["id"] == REAL)
    assert raw["peer_to_peer"]["value"] is False and raw["peer_to_peer"]["source"] == "nccl-1127"
    twin = {k: v for k, v in raw.items() if k != "peer_to_peer"}
    twin.update(id="my-4090", name="my 4090", aliases=[], peer_to_peer=False)
    path = tmp_path / "hw.yaml"
    path.write_text(json.dumps({"devices": [twin]}), encoding="utf-8")
    out = {}
    for dev in (REAL, "my-4090"):
        clear_caches()
        r = fit_training("llama-3.2-1b", dev, 2, tokens=1e8, hardware_files=[path], **RUN)
        assert r.fits and r.training_time is not None
        out[dev] = r.training_time
    mine, real = out["my-4090"], out[REAL]
    assert mine["step"]["topology"] == real["step"]["topology"] == "host-staged"
    coll = _collective(mine["assumptions"])
    assert coll["value"] == HOST_STAGED_COLLECTIVE_BANDWIDTH.expected
    assert "my-4090 peer_to_peer false" in coll["why"] and "user:hw.yaml" in coll["why"]
    assert "rtx-4090 peer_to_peer false (nccl-1127" in _collective(real["assumptions"])["why"]
    assert mine["seconds"] == real["seconds"] and mine["step"] == real["step"]


def test_a_hardware_file_can_state_peer_to_peer_for_the_catalog_rtx_4090(tmp_path: Path) -> None:
    """A user whose RTX 4090s do map each other's memory (a patched driver) overrides the catalog row's flag in a
    hardware file: the collectives then take the card's own PCIe 4 link, and the assumption names the file."""
    path = tmp_path / "p2p.yaml"
    path.write_text("devices:\n  - id: rtx-4090\n    peer_to_peer: true\n", encoding="utf-8")
    clear_caches()
    r = fit_training("llama-3.2-1b", REAL, 2, tokens=1e8, hardware_files=[path], **RUN)
    clear_caches()
    assert r.training_time is not None and r.training_time["step"]["topology"] == "direct"
    coll = _collective(r.training_time["assumptions"])
    assert coll["value"] == PCIE4 and "rtx-4090 peer_to_peer true (user:p2p.yaml" in coll["why"]
