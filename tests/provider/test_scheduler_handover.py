"""Hand-over to the schedulers providers run (#14): an inventory imported from a REAL `scontrol show node` output
and a REAL `kubectl get nodes -o json` output (tests/fixtures/real_outputs/scontrol-show-node/ and
kubectl-get-nodes-json/, sources in the README there), checked, booked, and exported as a Slurm reservation, Kueue
YAML and a Blazar lease command."""

from __future__ import annotations

import argparse
import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from llmsizer.cli.capacity_cmd import export_answer
from llmsizer.errors import InputError
from llmsizer.provider.placement import ONGOING_END
from llmsizer.provider.scheduler_export import Handover, blazar, kueue, slurm
from llmsizer.provider.scheduler_import import inventory_yaml, parse_scontrol_nodes

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs" / "scontrol-show-node"
A40 = FIX / "a40-1gpu-slinky-k8s.txt"


def _chat_request(*, engine: str, concurrency: int, resources: str) -> str:
    """The round trips' request: one week of Qwen2.5-0.5B chat serving at 2k context from 2026-02-01."""
    return f"""version: 1
team: Chat team
jobs:
  - name: chat
    kind: inference
    model: {{name: qwen2.5-0.5b}}
    engine: {engine}
    traffic: {{concurrency: {{typical: {concurrency}}}, context: {{typical: 2k}}}}
    service: {{duration: 7 days}}
    resources: {resources}
    start: 2026-02-01
"""


def test_parse_real_scontrol_show_node():
    (n,) = parse_scontrol_nodes(A40.read_text(), str(A40))
    # the values as printed in the fixture: Gres=gpu:a40:1(S:...), CPUEfctv=11 of CPUTot=12 (CoreSpecCount=1 keeps
    # one core for the system: the schedulable count is CPUEfctv, as CfgTRES=cpu=11 says), RealMemory=245760
    assert (n.name, n.gpu_type, n.gpus, n.cpus, n.cpus_total, n.memory_mib) == ("gpunode-1", "a40", 1, 11, 12, 245760)
    assert "cpu=11," in A40.read_text()  # CfgTRES agrees with CPUEfctv
    assert n.partitions == ("tn",) and n.state == "IDLE+DYNAMIC_NORM" and n.features == ("esc8000a", "a40")
    # `scontrol --oneliner` is the same record with Slurm's line_end " " instead of "\n   " and one "\n" after a
    # node instead of a blank line (SchedMD/slurm src/api/node_info.c, slurm_sprint_node_table:
    # `line_end = (one_liner) ? " " : "\n   "`). No recorded --oneliner output was found; this derives it from
    # the real multi-line recording by that rule, for two nodes (the second renamed) so the record split is tested.
    text = A40.read_text()
    one = text.rstrip("\n").replace("\n   ", " ") + "\n"
    assert "\n" not in one.rstrip("\n") and one.startswith("NodeName=gpunode-1 Arch=x86_64 CoresPerSocket=1  CPUAlloc")
    assert parse_scontrol_nodes(one) == [n]
    two = parse_scontrol_nodes(one + one.replace("gpunode-1", "gpunode-2"))
    assert [m.name for m in two] == ["gpunode-1", "gpunode-2"] and two[0] == n
    assert two[1].gpus == 1 and two[1].memory_mib == 245760
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
    # Slurm's type a40 is the catalog's a40 (NVIDIA A40 datasheet row): no --device-map needed
    assert run("capacity", "import", "--scontrol", str(A40), "--site", "k8s-lab",
               "--pools", "serving", "-o", str(inv)) == 0
    data = yaml.safe_load(inv.read_text())
    assert data["nodes"] == [{"id": "gpunode-1", "site": "k8s-lab", "device": "a40", "devices": 1, "cpus": 11,
                              "ram": "245760 MiB", "pools": ["serving", "tn"]}]
    inv.write_text(inv.read_text() + "storage: [{id: fs, site: k8s-lab, capacity: 10 TB}]\n")
    req = tmp_path / "req.yaml"
    req.write_text(_chat_request(engine="vllm", concurrency=2, resources="{device: a40, count: 1, pool: tn}"))
    db = str(tmp_path / "b.db")
    assert run("capacity", "book", str(req), "--inventory", str(inv), "--db", db, "--now", "2026-01-15") == 0
    rid = capsys.readouterr().out.split("booked ")[1].split(":")[0]
    assert run("capacity", "export", rid, "--format", "slurm", "--db", db, "--user", "chat") == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "# times in UTC; TZ=UTC0 makes scontrol read StartTime as UTC (it reads local time and takes no zone)",
        f"TZ=UTC0 scontrol create reservation ReservationName=llmsizer-chat-{rid} StartTime=2026-02-01T00:00:00 "
        "Duration=10080 Nodes=gpunode-1 Users=chat",
        f"sbatch --reservation=llmsizer-chat-{rid} --nodes=1 --gres=gpu:1 JOB_SCRIPT"]
    # Kueue: without the inventory the ClusterQueue's cpu and memory quota is unknown: one line, exit 2, no YAML
    with pytest.raises(InputError, match=r"a Kueue export needs --inventory"):
        export_answer(argparse.Namespace(id=rid, format="kueue", db=db, user=None, account=None, inventory=None,
                                         hardware_file=[], auth=None, token_file=None))
    assert not capsys.readouterr().out
    assert run("capacity", "export", rid, "--format", "kueue", "--db", db, "--inventory", str(inv)) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    # probe25 D6: a pod requesting cpu or memory (every vLLM pod) is admitted only if the ClusterQueue covers them
    # (Kueue flavorassigner.go findFlavorForPodSetResource: "resource cpu unavailable in ClusterQueue"): the quota is
    # the booked node's, as the fixture prints it: CPUEfctv=11, RealMemory=245760 (MiB)
    group = docs[1]["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    assert group["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": 11}, {"name": "memory", "nominalQuota": 245760 * 2**20},
        {"name": "nvidia.com/gpu", "nominalQuota": 1}]
    # only the team's namespace may use it (an empty selector matches every namespace); Kubernetes labels every
    # namespace kubernetes.io/metadata.name=<its name>
    assert docs[1]["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "chat-team"}}
    assert docs[2]["metadata"]["namespace"] == "chat-team" and docs[2]["spec"]["clusterQueue"] == \
        docs[1]["metadata"]["name"]
    assert run("capacity", "export", rid, "--format", "blazar", "--db", db) == 0
    assert capsys.readouterr().out == (
        "openstack reservation lease create --reservation 'resource_type=physical:host,min=1,max=1,"
        "hypervisor_properties=[\"in\", \"$hypervisor_hostname\", \"gpunode-1\"]' --start-date '2026-02-01 00:00' "
        f"--end-date '2026-02-08 00:00' llmsizer-chat-{rid}\n")
    # only a confirmed booking is handed over; an unknown id is bad input
    assert run("capacity", "release", rid, "--db", db) == 0
    assert run("capacity", "export", rid, "--format", "slurm", "--db", db, "--user", "chat") == 1
    assert run("capacity", "export", "nope", "--format", "slurm", "--db", db, "--user", "chat") == 2


def test_ongoing_booking_exports():
    h = Handover("abc", "svc", dt.datetime(2026, 1, 1), ONGOING_END, ("n1", "n2"), 4, "h100-sxm", "ML team", "svc",
                 cpus=2 * 96, ram=2 * 2**40)
    assert "Duration=UNLIMITED Nodes=n1,n2" in slurm(h) and "--gres=gpu:4" in slurm(h)
    assert "--end-date '2027-01-01 00:00'" in blazar(h) and "--prolong-for" in blazar(h)
    assert "nominalQuota: 8" in kueue(h) and "until released" in kueue(h)


def test_blazar_end_rounds_up_to_the_minute():
    # probe23 C4: a booking ending 01:50:26 must not get a lease ending 01:50 (26 s early); Slurm's Duration rounds
    # its minutes up the same way
    start, end = dt.datetime(2026, 12, 6, 18, 7, 0), dt.datetime(2026, 12, 8, 1, 50, 26)
    h = Handover("abc", "svc", start, end, ("n1",), 8, "h100-sxm", None, "svc")
    assert "--end-date '2026-12-08 01:51'" in blazar(h)
    assert "Duration=1904 " in slurm(h)  # 1903 min 26 s -> 1904
    on_the_minute = Handover("abc", "svc", start, dt.datetime(2026, 12, 8, 1, 50), ("n1",), 8, "h100-sxm", None, "svc")
    assert "--end-date '2026-12-08 01:50'" in blazar(on_the_minute)
    at_hour_end = Handover("abc", "svc", start, dt.datetime(2026, 12, 31, 23, 59, 0, 1), ("n1",), 8, "h100-sxm",
                           None, "svc")
    assert "--end-date '2027-01-01 00:00'" in blazar(at_hour_end)


# ------------------------------------------------------------------------------------ kubectl get nodes -o json
KUBE = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs" / "kubectl-get-nodes-json"
A16 = KUBE / "rke2-1node-a16-4q-vgpu.json"  # one RKE2 node, NVIDIA A16-4Q vGPU, GPU operator v24.9.2 labels
AKS = KUBE / "aks-3nodes-cpu-only.json"  # three AKS nodes without GPUs


def test_parse_real_kubectl_node_list():
    from llmsizer.provider.scheduler_import import parse_kubectl_nodes
    (n,) = parse_kubectl_nodes(A16.read_text(), str(A16))
    # as printed in the fixture: allocatable nvidia.com/gpu "1", labels nvidia.com/gpu.product "NVIDIA-A16-4Q" and
    # nvidia.com/gpu.memory "4096", capacity cpu "2", memory "16367668Ki" (= 15984 MiB: the value the project the
    # capture comes from expects in its own test, ResourceRamMb 15984), Ready condition "True"
    assert (n.name, n.resource, n.gpus, n.product, n.gpu_memory_mib, n.cpus, n.ram_mib, n.state) == \
        ("nori", "nvidia.com/gpu", 1, "NVIDIA-A16-4Q", 4096, 2, 15984, "Ready=True")
    cpu = parse_kubectl_nodes(AKS.read_text(), str(AKS))
    # capacity cpu "2", memory "8152800Ki" (7961 MiB, again the upstream test's ResourceRamMb); AKS pool label
    assert [(c.name, c.gpus, c.cpus, c.ram_mib, c.pools) for c in cpu] == [
        (f"aks-agentpool-30520393-vmss00000{i}", 0, 2, 7961, ("agentpool",)) for i in range(3)]


def test_kubernetes_quantities():
    from llmsizer.provider.scheduler_import import quantity
    # k8s.io/apimachinery resource.Quantity suffixes: binary, decimal, milli, exponent
    assert [quantity(q, "x") for q in ("8", "1900m", "16367668Ki", "2Gi", "129e6", "1k")] == \
        [8, Decimal("1.9"), 16367668 * 1024, 2 * 2**30, 129_000_000, 1000]
    with pytest.raises(InputError, match="is not a Kubernetes quantity"):
        quantity("12 GB", "x")


def test_gpu_feature_discovery_products_match_catalog_devices():
    """GPU feature discovery writes the NVML name with spaces as '-' (NVIDIA k8s-device-plugin internal/lm/resource.go
    sanitise): the same catalog match as `hardware detect` finds the device. The names are nvidia-smi's, from the
    real captures in tests/fixtures/real_outputs (nvidia-smi -L / -q)."""
    from llmsizer.catalog.detect import catalog_gpu
    from llmsizer.catalog.hardware import builtin_catalog
    cat = builtin_catalog()
    for smi_name, device in (("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA L40S", "l40s")):
        label = "-".join(smi_name.split())
        assert catalog_gpu(cat, label).id == catalog_gpu(cat, smi_name).id == device


def test_kubectl_import_refuses_what_it_cannot_place(tmp_path, capsys):
    from llmsizer.cli.main import main

    def run(*argv: str) -> int:
        return main(list(argv))
    out = str(tmp_path / "inv.yaml")
    base = ("capacity", "import", "--kubectl", str(A16), "--site", "lab", "-o", out)
    # the A16-4Q vGPU profile is no catalog device: the line names it and its label memory
    assert run(*base) == 2
    assert "GPU product(s) NVIDIA-A16-4Q (4096 MiB each) are not catalog devices" in capsys.readouterr().err
    # mapping the 4 GiB vGPU slice onto a whole L4 would promise memory the node does not have
    assert run(*base, "--device-map", "NVIDIA-A16-4Q=l4") == 2
    assert "nvidia.com/gpu.memory=4096 MiB is less than l4's" in capsys.readouterr().err
    assert run("capacity", "import", "--kubectl", str(AKS), "--site", "lab", "-o", out) == 2
    assert "no node with nvidia.com/gpu or amd.com/gpu" in capsys.readouterr().err
    assert not Path(out).exists()


def test_kubectl_import_check_book_export_round_trip(tmp_path, capsys):
    pytest.importorskip("sqlalchemy")
    from .test_cli_capacity import run
    hw = tmp_path / "hw.yaml"
    # the operator describes the vGPU profile (memory as its nvidia.com/gpu.memory label says) and maps the label to it
    hw.write_text("devices:\n  - {id: a16-4q, name: NVIDIA A16-4Q vGPU, kind: gpu, memory: 4096MiB}\n")
    inv = tmp_path / "inv.yaml"
    assert run("capacity", "import", "--kubectl", str(A16), "--site", "lab", "--device-map", "NVIDIA-A16-4Q=a16-4q",
               "--hardware-file", str(hw), "--pools", "serving", "-o", str(inv)) == 0
    assert "wrote" in capsys.readouterr().out
    data = yaml.safe_load(inv.read_text())
    assert data["nodes"] == [{"id": "nori", "site": "lab", "device": "a16-4q", "devices": 1, "cpus": 2,
                              "ram": "15984 MiB", "pools": ["serving"]}]
    inv.write_text(inv.read_text() + "storage: [{id: fs, site: lab, capacity: 10 TB}]\n")
    req = tmp_path / "req.yaml"
    req.write_text(_chat_request(engine="llama.cpp", concurrency=1, resources="{device: a16-4q, count: 1}"))
    db = str(tmp_path / "b.db")
    common = ("--inventory", str(inv), "--hardware-file", str(hw), "--now", "2026-01-15")
    assert run("capacity", "check", str(req), *common) == 0
    assert "FITS     at lab (provider): nori" in capsys.readouterr().out
    assert run("capacity", "book", str(req), *common, "--db", db) == 0
    rid = capsys.readouterr().out.split("booked ")[1].split(":")[0]
    assert run("capacity", "export", rid, "--format", "kueue", "--db", db, "--inventory", str(inv),
               "--hardware-file", str(hw)) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    # the node's capacity as the fixture prints it: cpu "2", memory "16367668Ki" (15984 MiB as imported)
    assert docs[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": 2}, {"name": "memory", "nominalQuota": 15984 * 2**20},
        {"name": "nvidia.com/gpu", "nominalQuota": 1}]
    assert run("capacity", "export", rid, "--format", "slurm", "--db", db, "--account", "ml") == 0
    assert "Nodes=nori" in capsys.readouterr().out
    # a 7B model does not fit the 4 GiB vGPU: `plan` says so, and the provider's check gives the same answer (it
    # printed FITS and booked it before: the check took the device count as given)
    big = tmp_path / "big.yaml"
    big.write_text(req.read_text().replace("qwen2.5-0.5b", "qwen2.5-7b").replace("name: chat", "name: chat7"))
    assert run("capacity", "check", str(big), *common) == 1
    out = capsys.readouterr().out
    assert "DOES NOT FIT in the requested window: [memory] a16-4q does not hold the job" in out
    assert run("capacity", "book", str(big), *common, "--db", db) == 1


@pytest.mark.parametrize(("text", "message"), [
    ("nodes: [", "not JSON"),
    ('{"kind": "PodList", "items": []}', "not `kubectl get nodes -o json` output"),
    ('{"kind": "List", "items": []}', "the node list is empty"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"kind": "List", "items": [' + "[" * 100_000 + "]" * 100_000 + "]}", "nested too deeply"),
    ('{"kind": "List", "items": [[]]}', r"items\[0\]: expected a mapping"),
    ('{"kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": {"nvidia.com/gpu": "8 GPUs"}}}',
     "is not a Kubernetes quantity"),
    ('{"kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": {"nvidia.com/gpu": "1500m"}}}',
     "is not a whole number of devices"),
    ('{"kind": "Node", "metadata": {"name": "n1\\nnodes: []"}}', "is not a Kubernetes name"),
    ('{"kind": "Node", "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "x: y"}}, '
     '"status": {"capacity": {"nvidia.com/gpu": "1"}}}', "is not a Kubernetes name"),
])
def test_kubectl_bad_input_is_one_line(text, message):
    """Made-up broken inputs (not fixtures of real output): each is one InputError line, nothing half-read."""
    from llmsizer.provider.scheduler_import import parse_kubectl_nodes
    with pytest.raises(InputError, match=message) as e:
        parse_kubectl_nodes(text, "nodes.json")
    assert "\n" not in str(e.value) and str(e.value).startswith("nodes.json")


def test_shared_gpus_count_whole_devices():
    """Made-up node (not a recorded output): time-slicing advertises replicas x GPUs as nvidia.com/gpu and marks the
    product -SHARED (k8s-device-plugin internal/lm/resource.go); the inventory holds the physical GPUs."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.provider.scheduler_import import kubectl_inventory_yaml, parse_kubectl_nodes
    node = ('{"kind": "Node", "metadata": {"name": "g5", "labels": {"nvidia.com/gpu.product": "NVIDIA-A10G-SHARED", '
            '"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.memory": "23028"}}, '
            '"status": {"allocatable": {"nvidia.com/gpu": "4"}, "capacity": {"cpu": "8", "memory": "32Gi"}, '
            '"conditions": [{"type": "Ready", "status": "True"}]}}')
    (n,) = parse_kubectl_nodes(node)
    assert (n.gpus, n.product, n.state) == (1, "NVIDIA-A10G-SHARED", "Ready=True,time-sliced x4 (4 replicas)")
    text, _ = kubectl_inventory_yaml([n], site="s", device_map={}, pools=("serving",), catalog=builtin_catalog())
    assert yaml.safe_load(text)["nodes"] == [{"id": "g5", "site": "s", "device": "a10g", "devices": 1, "cpus": 8,
                                              "ram": "32768 MiB", "pools": ["serving"]}]


def test_kueue_names_the_inventory_keys_it_lacks() -> None:
    """review36 D2: an inventory without a booked node's cpus or ram is named as such (the web's inventory is the
    server's, so the line cannot send a web caller to a CLI flag)."""
    h = Handover("abc", "svc", dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 2), ("n1",), 8, "h100-sxm", "ML team",
                 ram=2**40)
    with pytest.raises(InputError, match=r"the inventory gives no cpus for the booked node\(s\) n1; add them"):
        kueue(h)
