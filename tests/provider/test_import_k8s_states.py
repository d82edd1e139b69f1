"""`capacity import --kubectl`: a node Kubernetes places no new pods on is not bookable -- written commented out with
the reason and named on stderr, as the Slurm import does with a node that takes no new jobs (provider/
scheduler_import.py ``K8S_UNAVAILABLE``, ``_write_node``). Before, such a node was written bookable, its state only
in a comment.

No real `kubectl get nodes -o json` output with a not-ready, cordoned or tainted node is stored (tests/fixtures/
real_outputs/README.md lists the two there: both nodes of each Ready=True, no spec.unschedulable, no taints). So each
variant is derived from the REAL RKE2 node (rke2-1node-a16-4q-vgpu.json) by the documented field change only, the rest
as recorded:
- not ready: its Ready condition's ``status`` "False" (Kubernetes docs, "Node Status": False, not healthy and not
  accepting pods) with the taint the node controller then adds, ``node.kubernetes.io/not-ready:NoSchedule``
  ("Taints and Tolerations", Taint based Evictions; k8s.io/api core/v1 well_known_taints.go);
- unreachable: ``status`` "Unknown" (the node controller has not heard from it);
- cordoned: ``spec.unschedulable: true`` (what `kubectl cordon` sets) with ``node.kubernetes.io/unschedulable:NoSchedule``;
- a GPU pool's own taint ``nvidia.com/gpu=present:NoSchedule`` (reserves the node for pods that tolerate it; GKE adds
  it to GPU node pools): still bookable.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from llmsizer.errors import InputError
from llmsizer.provider.scheduler_import import parse_kubectl_nodes

pytest.importorskip("sqlalchemy")
from .test_cli_capacity import run  # noqa: E402

A16 = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs" / "kubectl-get-nodes-json" / \
    "rke2-1node-a16-4q-vgpu.json"
HW = "devices:\n  - {id: a16-4q, name: NVIDIA A16-4Q vGPU, kind: gpu, memory: 4096MiB}\n"  # as the round trip's


def _variant(name: str, ready: str = "True", unschedulable: bool = False, taints: tuple[tuple[str, str], ...] = ()
             ) -> dict:
    """The real node, renamed, with its Ready condition's status, spec.unschedulable and spec.taints changed."""
    (node,) = copy.deepcopy(json.loads(A16.read_text())["items"])
    node["metadata"]["name"] = name
    (cond,) = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert cond["status"] == "True"  # the premise: the recorded node is ready
    cond["status"] = ready
    assert "unschedulable" not in node["spec"] and "taints" not in node["spec"]  # the premise: none recorded
    if unschedulable:
        node["spec"]["unschedulable"] = True
    if taints:
        node["spec"]["taints"] = [{"key": k, "effect": e, **({"value": "present"} if k == "nvidia.com/gpu" else {})}
                                  for k, e in taints]
    return node


def _node_list(tmp_path: Path, *nodes: dict) -> Path:
    doc = json.loads(A16.read_text())
    doc["items"] = [json.loads(A16.read_text())["items"][0], *nodes]
    p = tmp_path / "nodes.json"
    p.write_text(json.dumps(doc))
    return p


def _import(tmp_path: Path, src: Path, out: str = "inv.yaml") -> int:
    (tmp_path / "hw.yaml").write_text(HW)
    return run("capacity", "import", "--kubectl", str(src), "--site", "lab", "--device-map", "NVIDIA-A16-4Q=a16-4q",
               "--hardware-file", str(tmp_path / "hw.yaml"), "-o", str(tmp_path / out))


def test_states_read_from_the_real_node_and_its_variants():
    (real,) = parse_kubectl_nodes(A16.read_text())
    assert real.state == "Ready=True" and real.unavailable == ""
    cases = {
        "nr": (_variant("nr", "False", taints=(("node.kubernetes.io/not-ready", "NoSchedule"),)),
               "not ready (Ready=False), not ready (taint node.kubernetes.io/not-ready:NoSchedule)"),
        "un": (_variant("un", "Unknown"), "not reporting to the control plane (Ready=Unknown)"),
        "co": (_variant("co", unschedulable=True, taints=(("node.kubernetes.io/unschedulable", "NoSchedule"),)),
               "cordoned (spec.unschedulable), cordoned (taint node.kubernetes.io/unschedulable:NoSchedule)"),
        "gp": (_variant("gp", taints=(("nvidia.com/gpu", "NoSchedule"),)), ""),
        "pr": (_variant("pr", taints=(("node.kubernetes.io/unschedulable", "PreferNoSchedule"),)), ""),
    }
    for name, (node, why) in cases.items():
        (n,) = parse_kubectl_nodes(json.dumps(node))
        assert n.unavailable == why, name
    (gp,) = parse_kubectl_nodes(json.dumps(cases["gp"][0]))
    assert gp.state == "Ready=True,taint nvidia.com/gpu:NoSchedule"  # kept in the comment


def test_a_cordoned_or_not_ready_node_is_written_out_of_service(tmp_path, capsys):
    src = _node_list(tmp_path, _variant("nr", "False", taints=(("node.kubernetes.io/not-ready", "NoSchedule"),)),
                     _variant("co", unschedulable=True,
                              taints=(("node.kubernetes.io/unschedulable", "NoSchedule"),)),
                     _variant("gp", taints=(("nvidia.com/gpu", "NoSchedule"),)))
    assert _import(tmp_path, src) == 0
    captured = capsys.readouterr()
    assert "nr: Ready=False,taint node.kubernetes.io/not-ready:NoSchedule (not ready (Ready=False), not ready " \
           "(taint node.kubernetes.io/not-ready:NoSchedule)), written out_of_service (not bookable" in captured.err
    assert "co: Ready=True,cordoned,taint node.kubernetes.io/unschedulable:NoSchedule (cordoned " \
           "(spec.unschedulable)" in captured.err
    assert "wrote" in captured.out and "2 bookable node(s)" in captured.out
    text = (tmp_path / "inv.yaml").read_text()
    rows = {n["id"]: n.get("out_of_service", "") for n in yaml.safe_load(text)["nodes"]}
    assert [k for k, v in rows.items() if not v] == ["nori", "gp"]
    assert rows["nr"].startswith("Ready=False") and "cordoned" in rows["co"]


def test_no_bookable_node_writes_it_out_of_service(tmp_path, capsys):
    """probe10 #7: every GPU node out of service was refused (exit 2) with "written commented out" and no file; now
    the file is written, the row marked out_of_service (probe30 D5: its bookings are kept), exit 1 (nothing can be
    booked)."""
    (tmp_path / "hw.yaml").write_text(HW)
    doc = json.loads(A16.read_text())
    doc["items"] = [_variant("nori", "Unknown")]
    src = tmp_path / "down.json"
    src.write_text(json.dumps(doc))
    assert _import(tmp_path, src, "x.yaml") == 1
    err = capsys.readouterr().err
    assert "nori: Ready=Unknown (not reporting to the control plane (Ready=Unknown)), written out_of_service (not " \
           "bookable" in err and "no bookable node at site lab" in err
    text = (tmp_path / "x.yaml").read_text()
    (row,) = yaml.safe_load(text)["nodes"]
    assert row["id"] == "nori" and row["out_of_service"].startswith("Ready=Unknown")


@pytest.mark.parametrize(("spec", "message"), [
    ({"taints": [{"key": "a\nnodes: []", "effect": "NoSchedule"}]}, "is not a Kubernetes taint key"),
    ({"taints": [{"key": "k", "effect": "Sometimes"}]}, "is not one of NoSchedule"),
    ({"taints": ["k:NoSchedule"]}, "expected a mapping"),
])
def test_bad_taints_are_one_line(spec, message):
    """Made-up broken taints (not real output): one InputError line, nothing written into the YAML comment."""
    node = {"kind": "Node", "metadata": {"name": "n1"}, "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    with pytest.raises(InputError, match=message) as e:
        parse_kubectl_nodes(json.dumps(node), "nodes.json")
    assert "\n" not in str(e.value)
