"""Hand-over to the schedulers providers run (#14): an inventory imported from a REAL `scontrol show node` output
(tests/fixtures/real_outputs/scontrol-show-node/, source in the README there), booked, and exported as a Slurm
reservation, Kueue YAML and a Blazar lease command."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from llmsizer.errors import InputError
from llmsizer.provider.placement import ONGOING_END
from llmsizer.provider.scheduler_export import Handover, blazar, kueue, slurm
from llmsizer.provider.scheduler_import import inventory_yaml, parse_scontrol_nodes

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs" / "scontrol-show-node"
A40 = FIX / "a40-1gpu-slinky-k8s.txt"


def test_parse_real_scontrol_show_node():
    (n,) = parse_scontrol_nodes(A40.read_text(), str(A40))
    # the values as printed in the fixture: Gres=gpu:a40:1(S:...), CPUTot=12, RealMemory=245760, Partitions=tn
    assert (n.name, n.gpu_type, n.gpus, n.cpus, n.memory_mib) == ("gpunode-1", "a40", 1, 12, 245760)
    assert n.partitions == ("tn",) and n.state == "IDLE+DYNAMIC_NORM" and n.features == ("esc8000a", "a40")
    # --oneline prints the same Key=Value fields on one line per node: the same record read that way
    one = " ".join(line.strip() for line in A40.read_text().splitlines())
    assert parse_scontrol_nodes(one) == [n]
    with pytest.raises(InputError, match="not `scontrol show node` output"):
        parse_scontrol_nodes("PartitionName=tn\n")


def test_import_needs_a_catalog_device_for_each_slurm_gpu_type():
    nodes = parse_scontrol_nodes(A40.read_text())
    with pytest.raises(InputError, match=r"GPU type\(s\) a40 are not catalog devices: map each with --device-map"):
        inventory_yaml(nodes, site="s1", device_map={}, pools=("training",), known={"h100-sxm"})


def test_import_book_export_round_trip(tmp_path, capsys):
    pytest.importorskip("sqlalchemy")
    from .test_cli_capacity import run
    inv = tmp_path / "inv.yaml"
    # the catalog has no A40 entry: the operator maps Slurm's type to a catalog device (here the L40, only to run
    # the round trip; a real provider adds an a40 row with --hardware-file)
    assert run("capacity", "import", "--scontrol", str(A40), "--site", "k8s-lab", "--device-map", "a40=l40",
               "--pools", "serving", "-o", str(inv)) == 0
    data = yaml.safe_load(inv.read_text())
    assert data["nodes"] == [{"id": "gpunode-1", "site": "k8s-lab", "device": "l40", "devices": 1, "cpus": 12,
                              "ram": "245760 MiB", "pools": ["serving", "tn"]}]
    inv.write_text(inv.read_text() + "storage: [{id: fs, site: k8s-lab, capacity: 10 TB}]\n")
    req = tmp_path / "req.yaml"
    req.write_text("""version: 1
team: Chat team
jobs:
  - name: chat
    kind: inference
    model: {name: qwen2.5-0.5b}
    engine: vllm
    traffic: {concurrency: {typical: 2}, context: {typical: 2k}}
    service: {duration: 7 days}
    resources: {device: l40, count: 1, pool: tn}
    start: 2026-02-01
""")
    db = str(tmp_path / "b.db")
    assert run("capacity", "book", str(req), "--inventory", str(inv), "--db", db, "--now", "2026-01-15") == 0
    rid = capsys.readouterr().out.split("booked ")[1].split(":")[0]
    assert run("capacity", "export", rid, "--format", "slurm", "--db", db, "--user", "chat") == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"scontrol create reservation ReservationName=llmsizer-chat-{rid} StartTime=2026-02-01T00:00:00 "
        "Duration=10080 Nodes=gpunode-1 Users=chat",
        f"sbatch --reservation=llmsizer-chat-{rid} --nodes=1 --gres=gpu:1 JOB_SCRIPT"]
    assert run("capacity", "export", rid, "--format", "kueue", "--db", db) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    assert docs[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 1}]
    assert docs[2]["metadata"]["namespace"] == "chat-team" and docs[2]["spec"]["clusterQueue"] == \
        docs[1]["metadata"]["name"]
    assert run("capacity", "export", rid, "--format", "blazar", "--db", db) == 0
    assert capsys.readouterr().out == (
        "openstack reservation lease create --reservation resource_type=physical:host,min=1,max=1,"
        "hypervisor_properties='[\"in\", \"$hypervisor_hostname\", \"gpunode-1\"]' --start-date \"2026-02-01 00:00\" "
        f"--end-date \"2026-02-08 00:00\" llmsizer-chat-{rid}\n")
    # only a confirmed booking is handed over; an unknown id is bad input
    assert run("capacity", "release", rid, "--db", db) == 0
    assert run("capacity", "export", rid, "--format", "slurm", "--db", db) == 1
    assert run("capacity", "export", "nope", "--format", "slurm", "--db", db) == 2


def test_ongoing_booking_exports():
    h = Handover("abc", "svc", dt.datetime(2026, 1, 1), ONGOING_END, ("n1", "n2"), 4, "h100-sxm", "ML team")
    assert "Duration=UNLIMITED Nodes=n1,n2" in slurm(h) and "--gres=gpu:4" in slurm(h)
    assert "--end-date \"2027-01-01 00:00\"" in blazar(h) and "--prolong-for" in blazar(h)
    assert "nominalQuota: 8" in kueue(h) and "until released" in kueue(h)
