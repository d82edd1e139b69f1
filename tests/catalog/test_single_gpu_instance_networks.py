"""A 1-GPU instance run as 2 machines (`--gpus 2`, `recommend --train --gpus 2`), and a multi-GPU instance run as 2
machines (`--gpus 2 x its devices`), times its data-parallel collectives over the instance's own network, not as if
all GPUs shared one machine's link.

Truth for the figures: the providers' own pages, quoted. AWS 'up to' instances are timed at their baseline, the
bandwidth a run of hours keeps once its burst credits are spent ('These instances have a baseline bandwidth. To meet
additional demand, they can use a network I/O credit mechanism to burst beyond their baseline bandwidth. Instances
can use burst bandwidth for a limited time, typically from 5 to 60 minutes', EC2 User Guide 'Amazon EC2 instance
network bandwidth'). AWS's table 'Instance type | Baseline bandwidth (Gbps) | Burst bandwidth (Gbps)':
'g4dn.xlarge | 5.0 | 25.0', 'g5.xlarge | 2.5 | 10.0' (awsdocs/amazon-ec2-user-guide accelerated-computing-instances.md
@ d289961); g6.xlarge, g6e.xlarge 2500 and p5.4xlarge 100000 Mb/s as aws/karpenter-provider-aws transcribes AWS's
current tables ('Up to' rows from the baseline column: hack/code/bandwidth_gen.go @ 13286b9,
pkg/providers/instancetype/zz_generated.bandwidth.go @ 01a436f). Azure's 'Max Bandwidth (Mbps)' per size
(MicrosoftDocs/azure-docs articles/virtual-machines/sizes/gpu-accelerated/): 'Standard_NC40ads_H100_v5 | 2 | 40,000'
(ncadsh100v5-series.md @ 02affc8), 'Standard_NC4as_T4_v3 | 2 | 8000', NC8as 8000, NC16as 8000 (ncast4v3-series.md
@ dcab08d), 'Standard_NV36ads_A10_v5 | 4 | 40000' (nvadsa10v5-series.md @ de83e2c); NC24ads A100 v4 20,000 Mbps
(azure-nca100v4). Google Cloud's 'Maximum network bandwidth (Gbps)' per machine type ('GPU machine types',
docs.cloud.google.com/compute/docs/gpus, last updated 2026-04-14; a stored copy): 'a2-highgpu-1g | 12 | 85 | Yes |
24 | 1 | 40', 'a2-ultragpu-1g | 12 | 170 | 375 | 24 | 1 | 80', 'a3-highgpu-1g | 26 | 234 | 750 | 1 | 25 | 1 | 80',
'g2-standard-4 | 4 | 16 | 16 to 32 | 375 | 10 | 1 | 24', 'g2-standard-8 | 8 | 32 | 32 to 54 | 375 | 16 | 1 | 24',
'g2-standard-12 | 12 | 48 | 48 to 54 | 375 | 16 | 1 | 24', 'g2-standard-16 | 16 | 64 | 54 to 64 | 375 | 32 | 1 | 24',
'g2-standard-32 | 32 | 128 | 96 to 128 | 375 | 32 | 1 | 24' (the Gb/s column is the one before the GPU count).

The second test reads every 1-GPU instance's network from the catalog JSON files raw (value and unit, converted here,
not by the loader) and checks the estimate states that bandwidth as the one its collectives cross."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from cli.cli_run import answer
from llmsizer.catalog.hardware import load_catalog

GBIT = 1e9 / 8  # bytes/s per Gb/s
STATED = {  # 1-GPU instance: sustained Gb/s per machine, as the provider states it
    "aws-g4dn.xlarge": 5.0,
    "aws-g5.xlarge": 2.5,
    "aws-g6.xlarge": 2.5,
    "aws-g6e.xlarge": 2.5,
    "aws-p5.4xlarge": 100.0,
    "azure-standard_nc24ads_a100_v4": 20.0,
    "azure-standard_nc40ads_h100_v5": 40.0,
    "azure-standard_nc4as_t4_v3": 8.0,
    "azure-standard_nc8as_t4_v3": 8.0,
    "azure-standard_nc16as_t4_v3": 8.0,
    "azure-standard_nv36ads_a10_v5": 40.0,
    "gcp-a2-highgpu-1g": 24.0,
    "gcp-a2-ultragpu-1g": 24.0,
    "gcp-a3-highgpu-1g": 25.0,
    "gcp-g2-standard-4": 10.0,
    "gcp-g2-standard-8": 16.0,
    "gcp-g2-standard-12": 16.0,
    "gcp-g2-standard-16": 32.0,
    "gcp-g2-standard-32": 32.0,
}
BYTES_PER_S = {"Gb/s": 1e9 / 8, "Mb/s": 1e6 / 8}  # a unit as the instance files write it -> bytes/s


def _raw_networks() -> dict[str, tuple[int, float]]:
    """Instance id -> (device count, its network in bytes/s), for every GPU instance with one, read from the JSON
    files."""
    gpus = {d.id for d in load_catalog(()).devices.values() if d.kind == "gpu"}
    out: dict[str, tuple[int, float]] = {}
    folder = resources.files("llmsizer.catalog.data") / "hardware"
    for f in folder.iterdir():
        if not f.name.startswith("instances_"):
            continue
        for inst in json.loads(f.read_text())["instances"]:
            net = inst.get("network")
            if inst["device"] in gpus and net and net.get("value") is not None:
                out[inst["id"]] = (int(inst["device_count"]), float(net["value"]) * BYTES_PER_S[net["unit"]])
    return out


@pytest.mark.parametrize("iid,gbps", sorted(STATED.items()))
def test_single_gpu_instance_network_is_the_stated_sustained_bandwidth(iid: str, gbps: float) -> None:
    inst = load_catalog(()).instances[iid]
    assert inst.device_count == 1
    assert inst.network is not None, f"{iid} has no network"
    assert float(inst.network.base) == pytest.approx(gbps * GBIT)


RAW_ALL = _raw_networks()
RAW = {iid: bw for iid, (n, bw) in RAW_ALL.items() if n == 1}
RAW_MULTI = {iid: nb for iid, nb in RAW_ALL.items() if nb[0] > 1}


def test_the_raw_files_hold_the_stated_single_gpu_networks() -> None:
    assert set(STATED) <= set(RAW)


@pytest.mark.parametrize("iid", sorted(RAW))
def test_two_single_gpu_instances_collect_over_the_instance_network(iid: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    _, data = answer(["train", "qwen2.5-0.5b", "--device", iid, "--gpus", "2", "--tokens", "100000000"], capsys)
    dur = data["duration"]
    notes = {a["name"]: a for a in dur["assumptions"]}
    assert "inter_node_network" in notes, f"{iid}: collectives not timed over a network: {dur.get('warnings')}"
    assert notes["inter_node_network"]["value"] == pytest.approx(RAW[iid])
    assert iid in notes["inter_node_network"]["why"]
    assert not any("no network between the machines" in w for w in dur.get("warnings", []))


# Multi-GPU instances run as 2 machines (`--gpus 2 x devices`): their collectives between machines cross the
# instance's own network. AWS's fixed figures ('Network performance' table, awsdocs/amazon-ec2-user-guide
# accelerated-computing-instances.md @ d289961): 'g5.12xlarge | 40 Gigabit | ENA | EFA', 'g4dn.12xlarge | 50 Gigabit |
# ENA | EFA'; karpenter's transcription (zz_generated.bandwidth.go @ 01a436f): '"g6.12xlarge": 40000', '"g6e.12xlarge":
# 100000', '"g6e.48xlarge": 400000', '"p3.8xlarge": 10000' (Mb/s). Azure 'Max Bandwidth (Mbps)':
# 'Standard_NC80adis_H100_v5 | 4 | 80,000' (ncadsh100v5-series.md @ 02affc8), 'Standard_NC64as_T4_v3 | 8 | 32000'
# (ncast4v3-series.md @ dcab08d), 'Standard_NV72ads_A10_v5 | 8 | 80000' (nvadsa10v5-series.md @ de83e2c). Google
# Cloud's machine-type tables ('GPU machine types', as above): 'a2-highgpu-2g | 24 | 170 | Yes | 32 | 2 | 80',
# 'a2-highgpu-4g | 48 | 340 | Yes | 50 | 4 | 160', 'a3-highgpu-2g | 52 | 468 | 1,500 | 1 | 50 | 2 | 160',
# 'a3-highgpu-4g | 104 | 936 | 3,000 | 1 | 100 | 4 | 320', 'g2-standard-24 | 24 | 96 | 96 to 108 | 750 | 32 | 2 | 48',
# 'g2-standard-48 | 48 | 192 | 192 to 216 | 1,500 | 50 | 4 | 96', 'g2-standard-96 | 96 | 384 | 384 to 432 | 3,000 | 100 | 8 |
# 192'.
STATED_MULTI = {  # multi-GPU instance: (devices, Gb/s per machine) as the provider states it
    "aws-g5.12xlarge": (4, 40.0),
    "aws-g4dn.12xlarge": (4, 50.0),
    "aws-g6.12xlarge": (4, 40.0),
    "aws-g6e.12xlarge": (4, 100.0),
    "aws-g6e.48xlarge": (8, 400.0),
    "aws-p3.8xlarge": (4, 10.0),
    "azure-standard_nc80adis_h100_v5": (2, 80.0),
    "azure-standard_nc64as_t4_v3": (4, 32.0),
    "azure-standard_nv72ads_a10_v5": (2, 80.0),
    "gcp-a2-highgpu-2g": (2, 32.0),
    "gcp-a2-highgpu-4g": (4, 50.0),
    "gcp-a3-highgpu-2g": (2, 50.0),
    "gcp-a3-highgpu-4g": (4, 100.0),
    "gcp-g2-standard-24": (2, 32.0),
    "gcp-g2-standard-48": (4, 50.0),
    "gcp-g2-standard-96": (8, 100.0),
}


@pytest.mark.parametrize("iid,stated", sorted(STATED_MULTI.items()))
def test_multi_gpu_instance_network_is_the_stated_bandwidth(iid: str, stated: tuple[int, float]) -> None:
    inst = load_catalog(()).instances[iid]
    assert inst.device_count == stated[0]
    assert inst.network is not None, f"{iid} has no network"
    assert float(inst.network.base) == pytest.approx(stated[1] * GBIT)
    assert RAW_MULTI[iid] == (stated[0], pytest.approx(stated[1] * GBIT))


@pytest.mark.parametrize("iid", sorted(RAW_MULTI))
def test_two_multi_gpu_instances_collect_over_the_instance_network(iid: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    n, bw = RAW_MULTI[iid]
    _, data = answer(["train", "qwen2.5-0.5b", "--device", iid, "--gpus", str(2 * n), "--tokens", "100000000"],
                     capsys)
    dur = data["duration"]
    notes = {a["name"]: a for a in dur["assumptions"]}
    assert "inter_node_network" in notes, f"{iid}: collectives not timed over a network: {dur.get('warnings')}"
    assert notes["inter_node_network"]["value"] == pytest.approx(bw)
    assert iid in notes["inter_node_network"]["why"]
    assert not any("no network between the machines" in w for w in dur.get("warnings", []))


GCP_SINGLE = sorted(iid for iid in STATED if iid.startswith("gcp-"))


@pytest.mark.parametrize("iid", GCP_SINGLE)
def test_gcp_pair_all_reduce_runs_at_googles_stated_bandwidth(iid: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Two 1-GPU GCP machines: the ring all-reduce between them is timed at Google's 'Maximum network bandwidth'
    (one device per machine, so the ring's bus bandwidth is the machine's network, formulas/network.py eq. (11)),
    and the step's communication time is its bytes at that speed; before the catalog held these figures the run
    was timed as if both GPUs shared one machine's link (a warning)."""
    _, data = answer(["train", "qwen2.5-0.5b", "--device", iid, "--gpus", "2", "--tokens", "100000000"], capsys)
    step = data["duration"]["step"]
    assert step["topology"] == "multi-node"
    assert step["bus_bandwidth"] == pytest.approx(STATED[iid] * GBIT)
    assert step["comm_seconds"] == pytest.approx(step["comm_bytes"] / (STATED[iid] * GBIT))
