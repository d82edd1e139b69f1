"""probe31 1.4 / section 3: ``--device gb200`` over 64+ GPUs was sized on machines of 8 (the HGX default), a ~2x
swing in a pipeline + expert-parallel run's speed. The catalog now carries each device's NVLink domain where a
source states it (aiconfigurator's system files @095f58a: gb200.yaml / gb300.yaml ``num_gpus_per_rack: 72`` with
``inter_node_bw`` 'NVLink via NVSwitch within rack'; b200_sxm.yaml / h100_sxm.yaml ``num_gpus_per_node: 8``), and a
bare device's run says so with the flag to give (estimate/fit.py ``default_machine_size``). It is not applied as a
default (review39 D1/D2/D4): the machine size is also the host that FSDP1's hybrid sharding and the host-RAM check read,
a GB200 host is a 4-GPU tray, and the row covers NVL4 systems too; the truth for the timing is the same run with the
machine size given explicitly."""

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


def _run(argv: tuple[str, ...]) -> dict:
    code, d = run_json("train", *argv)
    assert code in (0, 1)
    return d


def _domain_warnings(d: dict) -> list[str]:
    return [w for w in d["warnings"] if "NVLink domain" in w]


@pytest.mark.parametrize("gpus,size", [(16, 72), (64, 72), (72, 72), (144, 72), (256, 64)])
def test_nvl72_domain_is_said_with_the_flag_not_assumed(gpus: int, size: int) -> None:
    d = _run(("llama-3.1-8b", "--device", "gb200", "--gpus", str(gpus)))
    (w,) = _domain_warnings(d)
    assert f"--gpus-per-node {size}" in w and "72 GPUs in one NVLink domain" in w
    assert "gpus_per_node" not in {x["name"] for x in d["assumptions"] if x["default"]}
    assert size == 72 or gpus % size == 0  # whole racks (specs/training.py uneven_machines)


@pytest.mark.parametrize("argv", [("--device", "gb200", "--gpus", "8"), ("--device", "b200", "--gpus", "64"),
                                  ("--device", "gb200", "--gpus", "64", "--gpus-per-node", "8")])
def test_hgx_boards_and_a_given_size_say_nothing(argv: tuple[str, ...]) -> None:
    assert _domain_warnings(_run(("llama-3.1-8b", *argv))) == []


def test_timed_on_machines_of_8_unless_the_size_is_given() -> None:
    base = ("llama-3.1-70b", "--device", "gb200", "--gpus", "256", "--tokens", "1B", "--zero", "1", "--network", "ib-ndr")
    d = _run(base)
    g = _run((*base, "--gpus-per-node", "64"))
    e = _run((*base, "--gpus-per-node", "8"))
    assert d["duration"]["seconds"] == pytest.approx(e["duration"]["seconds"])
    assert g["duration"]["seconds"] < 0.9 * d["duration"]["seconds"]  # the data-parallel ring on NVLink inside a rack


def test_fsdp1_hybrid_shard_is_not_sized_over_a_72_gpu_host() -> None:
    """review39 D1: FSDP1 HYBRID_SHARD shards within one host (torch distributed/fsdp/_init_utils.py, the node's
    device_count()): the bare gb200 run is sized as on machines of 8, not 72 (which said FITS at 83 GiB)."""
    from cli_capture import run
    argv = ("fit", "llama-3.1-70b", "--device", "gb200", "--count", "144", "--train", "--fsdp", "hybrid",
            "--fsdp-version", "1", "--precision", "fsdp-bf16-mixed")
    code, out, _ = run(*argv)
    code8, out8, _ = run(*argv, "--gpus-per-node", "8")
    assert code == code8 and out.split("NVLink domain")[0].count("GiB") >= 1
    assert [ln for ln in out.splitlines() if "GiB" in ln][:3] == [ln for ln in out8.splitlines() if "GiB" in ln][:3]


SERVE = ("fit", "llama-3.1-70b", "--device", "gb200", "--count", "16", "--engine", "vllm", "--concurrency", "64",
         "--json")


def _fit(*extra: str) -> dict:
    from cli_capture import run
    code, out, _ = run(*SERVE, *extra)
    assert code in (0, 1)
    return json.loads(out)


def _said(d: dict) -> bool:
    return any("NVLink domain" in w for w in d["warnings"])


def test_serving_keeps_machines_of_8_and_says_nothing_where_the_copy_stays_in_one():
    """review39 D6: TP 8 x 2 replicas on 16 gb200 warned "give --gpus-per-node 72" though following it changes
    nothing: each copy stays inside one machine of 8, so no serving traffic crosses machines either way. The truth
    is the run with the flag given: the same layout and the same total rate."""
    d, wide = _fit(), _fit("--gpus-per-node", "16")
    assert (d["tensor_parallel"], d["replicas"]) == (8, 2)
    assert (wide["tensor_parallel"], wide["replicas"]) == (8, 2)
    assert d["tokens_per_second_total"] == pytest.approx(wide["tokens_per_second_total"])
    assert not _said(d) and not _said(wide)


@pytest.mark.parametrize("layout", [("--tp", "16"), ("--tp", "8", "--pp", "2")])
def test_serving_says_the_flag_where_a_copy_crosses_machines_of_8(layout: tuple[str, ...]) -> None:
    """A copy of 16 devices (TP 16, or TP 8 x 2 stages) spans two machines of 8 and fits one NVL72 rack: said, with
    the flag; given it (and a network between machines of 8), the answer moves: the copy's collectives cross the
    network on machines of 8, the rack's NVLink on one machine of 16."""
    d = _fit(*layout)
    (w,) = [w for w in d["warnings"] if "NVLink domain" in w]
    assert "--gpus-per-node 72" in w and "(16 devices)" in w
    net = ("--network", "ib-ndr")
    eight, rack = _fit(*layout, *net), _fit(*layout, *net, "--gpus-per-node", "16")
    assert not _said(rack)
    assert rack["tokens_per_second_total"] > eight["tokens_per_second_total"]


def test_hgx_devices_say_nothing_whatever_the_layout() -> None:
    from cli_capture import run
    code, out, _ = run("fit", "llama-3.1-70b", "--device", "b200", "--count", "16", "--engine", "vllm", "--tp", "16")
    assert code in (0, 1) and "NVLink domain" not in out
