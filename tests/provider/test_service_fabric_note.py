"""probe30 D6: a service whose one copy spans machines was placed on a 1 Gb/s fabric with no word, its speed the
plan's, timed over the link inside a machine. The check now says, in one line, what the crossing traffic gets on
the placed fabric by the core's rules and that the service is not re-timed there. Truth by hand: a ring all-reduce
over machines runs at the slower of the link (an A100 PCIe's 32 GB/s) and the machine's network (NCCL bus
bandwidth; formulas/network.py eq. 11): the fabric's 1 Gb/s; a pipeline send gets one device's share of its
machine's network, 1 Gb/s / 4 = 250 Mb/s (eq. 8)."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run_json

NOW = ("--now", "2030-01-01")


def _note(tmp_path: Path, tp: int, pp: int, bandwidth: str = "1 Gb/s") -> list[str]:
    (tmp_path / "inv.yaml").write_text(
        f"version: 1\nsites:\n  - id: s1\n    fabrics: [{{id: eth, bandwidth: {bandwidth}}}]\nnodes:\n"
        "  - {id: n, count: 2, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving], fabric: eth}\n"
        "storage: [{id: fs, site: s1, capacity: 10 TB}]\n")
    (tmp_path / "r.yaml").write_text(
        "version: 1\ntitle: t\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-70b}\n  engine: vllm\n"
        f"  quantization: bf16\n  tensor_parallel: {tp}\n" + (f"  pipeline_parallel: {pp}\n" if pp > 1 else "")
        + "  resources: {device: a100-pcie-80gb, count: 8, nodes: 2}\n"
        "  traffic:\n    concurrency: {peak: 4, typical: 4}\n    context: {peak: 4k, typical: 4k}\n"
        "  service: {duration: 3 days}\n")
    _, d = run_json("capacity", "check", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                    "--no-db", *NOW)
    c = d[0]
    assert c["fits"] is True, c
    return list(c["notes"])


def test_tp_across_a_1gbps_fabric_is_said_with_the_all_reduce_bandwidth(tmp_path: Path) -> None:
    (note,) = _note(tmp_path, 8, 1)
    assert "gets 1 Gb/s there" in note and "eq. 11" in note
    assert "not timed again on the fabric" in note and "\n" not in note


def test_pipeline_stages_across_it_get_a_device_share(tmp_path: Path) -> None:
    (note,) = _note(tmp_path, 4, 2)
    assert "gets 250 Mb/s there" in note and "eq. 8" in note  # 1 Gb/s / 4


def test_a_fabric_faster_than_the_link_says_nothing(tmp_path: Path) -> None:
    assert _note(tmp_path, 8, 1, "3200 Gb/s") == []  # 400 GB/s per node: the all-reduce keeps the link's speed
