"""A 2-GPU service on an inventory of 1-GPU nodes (probe6 defect 11, the imported-Slurm A40 case): the plan lays the
two devices out as TP 2 on one machine, which no node holds; the same devices as two replicas, one per
node, hold the 8B model (one A40 has 48 GB for its 16 GB of bf16 weights). The request names no node count, so the
check places that layout (probe30 N3), and the request naming it (resources.nodes: 2: fit's layout on machines of 1, `fit --gpus-per-node 1`,
whose tensor-parallel degree within a machine is 1, so two replicas) fits on exactly the nodes it names. A service's nodes run no collective between them, so they need
no common fabric (an imported cluster has none)."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run_json
from llmsizer.estimate.fit import fit

INVENTORY = """\
version: 1
sites:
  - id: s1
nodes:
  - {id: gpunode-1, count: 2, site: s1, device: a40, devices: 1, cpus: 11, ram: 240 GiB, pools: [training, serving]}
storage: [{id: fs, site: s1, capacity: 100 TB}]
"""


def _request(nodes: str = "") -> str:
    return f"""\
version: 1
title: a40 two
jobs:
  - name: chat
    kind: inference
    model: {{name: llama-3.1-8b}}
    precision: bf16
    engine: vllm
    traffic:
      concurrency: {{typical: 2, peak: 4}}
      context: {{typical: 4k, peak: 8k}}
    resources:
      device: a40
      count: 2
      storage: 100 GB{nodes}
    start: 2027-01-10
    service:
      duration: 1 month
"""


def _check(tmp_path: Path, nodes: str = "") -> tuple[int, list]:
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "req.yaml").write_text(_request(nodes))
    code, d = run_json("capacity", "check", str(tmp_path / "req.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                       "--no-db", "--now", "2027-01-01T00:00")
    d = d["jobs"]
    return code, d


def test_a_tp_group_wider_than_the_nodes_is_placed_as_the_replica_layout(tmp_path: Path) -> None:
    """The request names no node count, so the plan's one 2-GPU machine is an assumption: the check places the
    replica layout itself, saying so (probe30 N3; before, [node-size] with this layout as the alternative)."""
    code, d = _check(tmp_path)
    c = d[0]
    assert code == 0 and c["fits"] is True, c
    assert sorted(c["placement"]["nodes"]) == ["gpunode-1-01", "gpunode-1-02"]
    assert "placed as 2 nodes of 1" in c["assumption"] and "--count 2 --gpus-per-node 1" in c["assumption"]


def test_the_request_naming_that_layout_fits_where_the_alternative_says(tmp_path: Path) -> None:
    code, d = _check(tmp_path, "\n      nodes: 2")
    c = d[0]
    assert code == 0 and c["fits"] is True, c
    assert sorted(c["placement"]["nodes"]) == ["gpunode-1-01", "gpunode-1-02"]
    assert c["placement"]["devices_per_node"] == 1
    # fit's layout on machines of 1 (the alternative's command): two replicas of one device, as the plan books them
    f = fit("llama-3.1-8b", "a40", 2, engine="vllm", weights="bf16", context=8192, concurrency=4, gpus_per_node=1)
    assert (f.tensor_parallel, f.replicas) == (1, 2) and f.fits
