"""probe31 1.4 / section 3: ``--device gb200`` over 64+ GPUs was sized on machines of 8 (the HGX default), a ~2x
swing in a pipeline + expert-parallel run's speed. The catalog now carries each device's NVLink domain where a
source states it (aiconfigurator's system files @095f58a: gb200.yaml / gb300.yaml ``num_gpus_per_rack: 72`` with
``inter_node_bw`` 'NVLink via NVSwitch within rack'; b200_sxm.yaml / h100_sxm.yaml ``num_gpus_per_node: 8``), and a
bare device's default machine size comes from it (estimate/fit.py ``default_machine_size``), said as an assumption;
the truth for the timing is the same run with the machine size given explicitly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import run_json
from llmsizer.catalog.hardware import load_catalog

DATA = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "catalog" / "data" / "hardware"


@pytest.mark.parametrize("dev,size,quote", [("gb200", 72, "num_gpus_per_rack: 72"),
                                            ("gb300", 72, "num_gpus_per_rack: 72"),
                                            ("b200", 8, "num_gpus_per_node: 8"), ("h100-sxm", 8, "num_gpus_per_node: 8")])
def test_catalog_states_the_domain_with_its_source(dev: str, size: int, quote: str) -> None:
    rows = {r["id"]: r for r in json.loads((DATA / "accelerators.json").read_text())["devices"]}
    row = rows[dev]["nvlink_domain"]
    assert row["value"] == size and row["source"] == "aiconfigurator" and quote in row["where"]
    if size == 72:
        assert "NVLink via NVSwitch within rack" in row["where"]
    d = load_catalog().device(dev)
    assert d.nvlink_domain is not None and d.nvlink_domain.base == size and d.nvlink_domain.date


def _gpn(argv: tuple[str, ...]) -> tuple[dict, dict | None]:
    code, d = run_json("train", *argv)
    assert code in (0, 1)
    a = {x["name"]: x for x in d["assumptions"]}.get("gpus_per_node")
    return d, a


@pytest.mark.parametrize("gpus,size", [(16, 72), (64, 72), (72, 72), (144, 72), (256, 64)])
def test_nvl72_default_machine_is_the_domain(gpus: int, size: int) -> None:
    _, a = _gpn(("llama-3.1-8b", "--device", "gb200", "--gpus", str(gpus)))
    assert a is not None and a["value"] == size and a["default"] and "NVLink domain" in a["why"]
    assert "--gpus-per-node" in a["why"]
    assert size == 72 or gpus % size == 0  # whole racks (specs/training.py uneven_machines)


@pytest.mark.parametrize("argv", [("--device", "gb200", "--gpus", "8"), ("--device", "b200", "--gpus", "64"),
                                  ("--device", "gb200", "--gpus", "64", "--gpus-per-node", "8")])
def test_hgx_boards_and_a_given_size_keep_theirs(argv: tuple[str, ...]) -> None:
    _, a = _gpn(("llama-3.1-8b", *argv))
    assert a is None or not a["default"]


def test_timed_as_with_the_size_given() -> None:
    base = ("llama-3.1-70b", "--device", "gb200", "--gpus", "256", "--tokens", "1B", "--zero", "1", "--network", "ib-ndr")
    d, _ = _gpn(base)
    g, _ = _gpn((*base, "--gpus-per-node", "64"))
    e, _ = _gpn((*base, "--gpus-per-node", "8"))
    assert d["duration"]["seconds"] == pytest.approx(g["duration"]["seconds"])
    assert d["duration"]["seconds"] < 0.9 * e["duration"]["seconds"]  # the data-parallel ring on NVLink inside a rack


def test_serving_keeps_machines_of_8_and_says_the_flag() -> None:
    # fit's serving layout keeps the HGX machine of 8 (its tensor-parallel search within one); on an NVL72 device it
    # says the domain and the flag that widens the search
    from cli_capture import run
    code, out, _ = run("fit", "llama-3.1-70b", "--device", "gb200", "--count", "16", "--engine", "vllm")
    assert code in (0, 1)
    assert "gb200: 72 GPUs share one NVLink domain" in out and "--gpus-per-node 72" in out
    code, out, _ = run("fit", "llama-3.1-70b", "--device", "gb200", "--count", "16", "--engine", "vllm",
                       "--gpus-per-node", "16")
    assert "NVLink domain" not in out
    code, out, _ = run("fit", "llama-3.1-70b", "--device", "b200", "--count", "16", "--engine", "vllm")
    assert "NVLink domain" not in out
