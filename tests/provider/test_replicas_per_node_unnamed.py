"""probe30 N3: a service of TP 4 x 2 replicas on 8 devices whose request gives no resources.nodes was refused
[node-size] on 4-GPU nodes ("8 per node needed"), though each copy fits one node. The plan's 8-GPU machine is its own
assumption when the request names no node count, so the check lays the devices on the inventory's nodes, each copy
inside one. Truth from the request's layout: a TP 4 copy is 4 devices, one 4-GPU node; Llama 3.1 70B (70.6e9
parameters, model card) in bf16 over 4 devices is 35.3 GB each, under an A100 80GB's 80 GB (datasheet). A TP 8 copy
spans two such nodes: no split keeps it in one, so that request is still refused [node-size]."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run_json

NOW = ("--now", "2030-01-01")
INVENTORY = ("version: 1\nsites:\n  - id: s1\nnodes:\n"
             "  - {id: n, count: 2, site: s1, device: a100-sxm-80gb, devices: 4, pools: [serving]}\n"
             "storage: [{id: fs, site: s1, capacity: 10 TB}]\n")


def _check(tmp_path: Path, tp: int) -> dict:
    assert 70.6e9 * 2 / 4 < 80e9
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "r.yaml").write_text(
        "version: 1\ntitle: t\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-70b}\n  engine: vllm\n"
        f"  quantization: bf16\n  tensor_parallel: {tp}\n  resources: {{device: a100-sxm-80gb, count: 8}}\n"
        "  traffic:\n    concurrency: {peak: 4, typical: 4}\n    context: {peak: 4k, typical: 4k}\n"
        "  service: {duration: 3 days}\n")
    _, d = run_json("capacity", "check", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                    "--no-db", *NOW)
    d = d["jobs"]
    return d[0]


def test_tp4_replicas_are_placed_one_per_4gpu_node(tmp_path: Path) -> None:
    c = _check(tmp_path, 4)
    assert c["fits"] is True, c
    assert sorted(c["placement"]["nodes"]) == ["n-01", "n-02"]
    assert (c["need"]["nodes"], c["need"]["copy_nodes"], c["need"]["devices"]) == (2, 1, 8)
    assert "resources.nodes not given" in c["assumption"] and "2 nodes of 4" in c["assumption"]


def test_tp8_copy_wider_than_a_node_is_still_refused(tmp_path: Path) -> None:
    c = _check(tmp_path, 8)
    assert c["fits"] is False and c["binding"] == "node-size", c
