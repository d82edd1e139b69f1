"""probe30 D6: a service whose one copy spans machines was placed on a 1 Gb/s fabric and kept the plan's speed,
timed over the link inside a machine. The check now times it again on the placed fabric, the way it re-times a
training run (placement.py ``on_fabric``: the request planned again with the fabric's bandwidth as its
resources.network), through the one core call `fit --network` makes (estimate/fit.py ``node_network``: a TP group's
all-reduces over formulas/network.py eqs. 11 and 13', a pipeline's sends over eqs. 8 and 14).

Truth: `fit --network` for the same layout, another surface (cross-surface); a slower fabric gives fewer tokens/s
and a later first token (the network's time only grows as its bandwidth falls); a layout whose copies each stay
inside a machine is not touched; and by hand, eq. 11's bus bandwidth across machines is the slower of the link (an
A100 PCIe's 32 GB/s) and the machine's network: at 1 Gb/s, 0.125 GB/s in the all-reduce's time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli_capture import run_json

NOW = ("--now", "2030-01-01")


def _check(tmp_path: Path, tp: int, pp: int, bandwidth: str | None = "1 Gb/s", count: int = 8) -> dict[str, Any]:
    fab = f"[{{id: eth, bandwidth: {bandwidth}}}]" if bandwidth else "[{id: eth}]"
    (tmp_path / "inv.yaml").write_text(
        f"version: 1\nsites:\n  - id: s1\n    fabrics: {fab}\nnodes:\n"
        "  - {id: n, count: 2, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving], fabric: eth}\n"
        "storage: [{id: fs, site: s1, capacity: 10 TB}]\n")
    (tmp_path / "r.yaml").write_text(
        "version: 1\ntitle: t\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-70b}\n  engine: vllm\n"
        f"  quantization: bf16\n  tensor_parallel: {tp}\n" + (f"  pipeline_parallel: {pp}\n" if pp > 1 else "")
        + f"  resources: {{device: a100-pcie-80gb, count: {count}, nodes: 2}}\n"
        "  traffic:\n    concurrency: {peak: 4, typical: 4}\n    context: {peak: 4k, typical: 4k}\n"
        "    output: {peak: 256, typical: 256}\n  service: {duration: 3 days}\n")
    _, d = run_json("capacity", "check", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                    "--no-db", *NOW)
    d = d["jobs"]
    c = d[0]
    assert c["fits"] is True, c
    return dict(c)


def _fit(tp: int, pp: int, network: str | None) -> dict[str, Any]:
    args = ["fit", "llama-3.1-70b", "--device", "a100-pcie-80gb", "--count", "8", "--gpus-per-node", "4",
            "--tp", str(tp), "--engine", "vllm", "--weights", "bf16", "--context", "4k", "--concurrency", "4",
            "--output-tokens", "256"]
    if pp > 1:
        args += ["--pp", str(pp)]
    if network is not None:
        args += ["--network", network]
    code, d = run_json(*args)
    assert code == 0, d
    return dict(d)


@pytest.mark.parametrize(("tp", "pp"), [(8, 1), (4, 2)])
def test_the_placed_service_is_timed_as_fit_network_times_it(tmp_path: Path, tp: int, pp: int) -> None:
    c = _check(tmp_path, tp, pp)
    need, speed = c["need"], _fit(tp, pp, "1 Gb/s")["speed"]
    assert need["timed_on_fabric"] == "eth"
    assert need["tokens_per_second_per_user"] == pytest.approx(speed["tokens_per_second_per_user"], rel=1e-9)
    assert need["ttft"] == pytest.approx(speed["ttft_seconds"], rel=1e-9)
    (note,) = c["notes"]
    assert "timed on fabric eth's 1 Gb/s per node" in note and "\n" not in note
    assert f"{speed['tokens_per_second_per_user']:.3g} tokens/s per user" in note


def test_a_slower_fabric_gives_a_slower_service(tmp_path: Path) -> None:
    slow = _check(tmp_path, 8, 1, "1 Gb/s")["need"]
    fast = _check(tmp_path, 8, 1, "100 Gb/s")["need"]
    assert slow["tokens_per_second_per_user"] < fast["tokens_per_second_per_user"]
    assert slow["ttft"] > fast["ttft"]


def test_fit_network_times_the_all_reduce_at_the_slower_of_link_and_network() -> None:
    d = _fit(8, 1, "1 Gb/s")
    said = next(a for a in d["speed"]["assumptions"] if a["name"] == "tp_allreduce")
    assert "bytes / 0.125 GB/s" in str(said["value"])  # eq. 11 by hand: min(32 GB/s, 1 Gb/s / 8 bits)
    assert _fit(8, 1, "100 Gb/s")["speed"]["tokens_per_second_per_user"] > \
        d["speed"]["tokens_per_second_per_user"]


def test_copies_inside_a_machine_are_not_retimed(tmp_path: Path) -> None:
    c = _check(tmp_path, 4, 1)  # TP 4 x 2 replicas, one per machine: nothing crosses
    assert c["need"]["timed_on_fabric"] == "" and c["notes"] == []
    plain = _fit(4, 1, None)["speed"]
    assert c["need"]["tokens_per_second_per_user"] == pytest.approx(plain["tokens_per_second_per_user"], rel=1e-9)
    given = _fit(4, 1, "1 Gb/s")  # fit --network on that layout: the same speed, and a word that it times nothing
    assert given["speed"]["tokens_per_second_per_user"] == plain["tokens_per_second_per_user"]
    assert any("times nothing here" in w for w in given["warnings"])


def test_a_fabric_with_no_bandwidth_leaves_the_plan_s_bound_and_says_so(tmp_path: Path) -> None:
    c = _check(tmp_path, 8, 1, None)
    (note,) = c["notes"]
    assert c["need"]["timed_on_fabric"] == "" and "states no bandwidth" in note and "upper bound" in note


def test_a_stated_network_is_what_the_fabric_must_give(tmp_path: Path) -> None:
    """A service whose copy spans machines and whose request states resources.network was timed over it: a fabric
    slower than it is refused [fabric], as a training run's is; the stated network, met, is not timed again."""
    for network, fits in (("100 Gb/s", False), ("1 Gb/s", True)):
        _check(tmp_path, 8, 1)  # writes the inventory (1 Gb/s fabric) and a request, rewritten below
        text = (tmp_path / "r.yaml").read_text().replace("nodes: 2}", f"nodes: 2, network: {network}}}")
        (tmp_path / "r.yaml").write_text(text)
        _, d = run_json("capacity", "check", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                        "--no-db", *NOW)
        d = d["jobs"]
        c = d[0]
        assert c["fits"] is fits, c
        assert c["need"]["timed_on_fabric"] == "" and (fits or c["binding"] == "fabric")
