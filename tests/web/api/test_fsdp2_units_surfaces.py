"""``fsdp2_units`` (specs/training.py; formulas/fsdp2_units.py) reaches the one estimate the same way from the CLI,
the Python API and the web API, is recorded as an assumption under FSDP2, and a bad value or a layout without FSDP2
is one line (exit 2, a 4xx on the web)."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli, run_cli_json

from llmsizer.estimate.training import estimate_training

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

TITAN = {"gpus": 8, "fsdp": "full", "precision": "fsdp-bf16-mixed", "micro_batch": 2, "seq_len": 8192,
         "grad_checkpointing": "selective-op", "metric": "reserved", "batch_shapes": "fixed"}
FLAGS = ["--gpus", "8", "--fsdp", "full", "--precision", "fsdp-bf16-mixed", "--batch", "2", "--seq", "8192",
         "--grad-checkpointing", "selective-op", "--metric", "reserved", "--batch-shapes", "fixed"]


def _item(d: dict, name: str) -> int:
    return int(next(i for i in d["items"] if i["name"] == name)["bytes"])


def test_torchtitan_units_through_cli_api_and_web(client) -> None:
    api = estimate_training("llama-3.1-8b", **TITAN, fsdp2_units="torchtitan").to_dict()
    cli = run_cli_json("train", "llama-3.1-8b", *FLAGS, "--fsdp2-units", "torchtitan")
    web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", **TITAN, "fsdp2_units": "torchtitan"})
    assert web.status_code == 200, web.text
    for name in ("gathered_params", "allocator_reserve"):
        assert _item(api, name) == _item(cli, name) == _item(web.json(), name)
    generic = estimate_training("llama-3.1-8b", **TITAN).to_dict()
    # the copy-in stream's pool joins the reduce-scatter stream's in the fixed-shape reserve
    assert _item(api, "allocator_reserve") > _item(generic, "allocator_reserve")
    units = {a["name"]: a for a in api["assumptions"]}["fsdp2_units"]
    assert units["value"] == "torchtitan" and not units["default"]
    assert {a["name"]: a for a in generic["assumptions"]}["fsdp2_units"]["default"]


def test_bad_fsdp2_units_is_one_line(client) -> None:
    done = run_cli("train", "llama-3.1-8b", "--fsdp2-units", "deepspeed")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "fsdp2-units" in done.stderr
    done = run_cli("train", "llama-3.1-8b", "--gpus", "8", "--fsdp2-units", "torchtitan")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "fsdp2_units" in done.stderr
    web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", "fsdp2_units": "deepspeed"})
    assert 400 <= web.status_code < 500 and "deepspeed" in web.text
