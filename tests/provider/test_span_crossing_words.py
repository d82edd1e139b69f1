"""What crosses between the machines one served copy spans is said from the request's own layout (probe30 D4: a
TP 4 x PP 2 copy on two 4-GPU machines was called "tensor parallel across machines"). The tensor-parallel ranks of
a stage are neighbours (Megatron-LM's rank order, which vLLM follows: ``--tp 4 --pp 2`` on 2 x 4 GPUs keeps each TP
group in one machine, vLLM docs "Distributed inference and serving"), so with 4 devices a machine a TP 4 group is
one machine and only the 2 stages' point-to-point sends cross; a TP 8 group is both machines."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run_json
from llmsizer.provider.placement import crossing
from llmsizer.provider.scheduler_export import Handover

NOW = ("--now", "2027-01-01T00:00")
PER_NODE = 4  # the inventory's devices per node below


def _inventory() -> str:  # two 4-GPU nodes, each on a fabric of its own: a copy spanning both is refused [fabric]
    return ("version: 1\nsites:\n  - id: s1\n    fabrics: [{id: a, bandwidth: 200 Gb/s}, {id: b, bandwidth: 200 Gb/s}]"
            "\nnodes:\n" + "".join(f"  - {{id: n{k}, site: s1, device: a100-pcie-80gb, devices: {PER_NODE}, "
                                   f"pools: [serving], fabric: {f}}}\n" for k, f in ((1, "a"), (2, "b")))
            + "storage: [{id: fs, site: s1, capacity: 100 TB}]\n")


def _reason(tmp_path: Path, tp: int, pp: int) -> str:
    (tmp_path / "inv.yaml").write_text(_inventory())
    (tmp_path / "r.yaml").write_text(
        "version: 1\ntitle: t\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-70b}\n  engine: vllm\n"
        f"  quantization: bf16\n  tensor_parallel: {tp}\n" + (f"  pipeline_parallel: {pp}\n" if pp > 1 else "")
        + "  resources: {device: a100-pcie-80gb, count: 8, nodes: 2}\n"
        "  traffic:\n    concurrency: {peak: 4, typical: 4}\n    context: {peak: 4k, typical: 4k}\n"
        "  service: {duration: 3 days}\n")
    _, d = run_json("capacity", "check", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                    "--no-db", *NOW)
    d = d["jobs"]
    c = d[0]
    assert c["fits"] is False and c["binding"] == "fabric", c
    return str(c["reason"])


def test_tp4_pp2_over_two_4gpu_machines_crosses_as_pipeline_stages(tmp_path: Path) -> None:
    why = _reason(tmp_path, 4, 2)
    assert "pipeline stages across machines" in why and "tensor parallel across machines" not in why


def test_tp8_over_two_4gpu_machines_crosses_as_tensor_parallel(tmp_path: Path) -> None:
    why = _reason(tmp_path, 8, 1)
    assert "tensor parallel across machines: each tensor-parallel group spans 2 machines" in why


def test_the_export_says_no_more_than_the_booking_knows() -> None:
    """A booking records the machines a copy spans, not its TP layout: the export's comment names both ways, in
    the one wording (placement.crossing), and never asserts tensor parallelism alone."""
    import datetime as dt
    h = Handover("abc", "j", dt.datetime(2027, 1, 1), dt.datetime(2027, 1, 2), ("n1", "n2"), 4, "a100-pcie-80gb",
                 copy_nodes=2)
    assert crossing(None) in h.span_note and "(tensor parallel across them)" not in h.span_note
