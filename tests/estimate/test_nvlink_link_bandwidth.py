"""One NVLink bandwidth rule for training's collectives and serving's tensor-parallel all-reduces
(estimate/device.py ``nvlink_link_bandwidth``, formulas/network.py eq. (12)).

Independent truth:
- NCCL's per-link NVLink figures (NVIDIA/nccl @5067397c src/graph/topo.h lines 19-24: SM70 20.0, SM80 20.0, SM90 20.6,
  SM100 40.1 GB/s) times the NVLink links of each GPU in NVIDIA's data sheets (V100 SXM2 6 NVLink 2 links, A100 SXM 12
  NVLink 3, H100 SXM 18 NVLink 4, B200 18 NVLink 5; the H100 NVL's bridge 12 links at 600 GB/s bidirectional);
- the bytes each kernel moves: a ring / two-stage all-reduce 2 (n - 1) / n S, vLLM's one-stage custom kernel
  (n - 1) S (vllm csrc/custom_all_reduce.cuh cross_device_reduce_1stage: every GPU reads each peer's whole buffer);
- the count of all-reduces of a Qwen2 decode step (2 per layer + 1, vLLM models/qwen2.py and
  vocab_parallel_embedding.py, as tests/estimate/test_tp_allreduce.py).
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate.device import nvlink_link_bandwidth
from llmsizer.estimate.fit import link_bandwidth_for
from llmsizer.estimate.speed import estimate_speed
from llmsizer.formulas import network
from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from request.helpers import job_yaml

GB = 1e9
# NCCL per-link figure (topo.h) x links per GPU (data sheets)
NCCL_NVLINK = {"v100-sxm2-32gb": 6 * 20.0 * GB, "a100-sxm-80gb": 12 * 20.0 * GB, "h100-sxm": 18 * 20.6 * GB,
               "h100-nvl": 12 * 20.6 * GB, "b200": 18 * 40.1 * GB}


@pytest.mark.parametrize("device", sorted(NCCL_NVLINK))
def test_the_nvlink_figure_is_nccls_per_generation(device: str) -> None:
    dev = builtin_catalog().devices[device]
    line = link_bandwidth_for(dev, None)
    assert line is not None
    bw, share = nvlink_link_bandwidth(dev, line)
    assert share is not None and bw == pytest.approx(NCCL_NVLINK[device])
    assert bw < line  # below the line rate on every generation


@pytest.mark.parametrize("device", ["a100-pcie-80gb", "rtx-a6000", "l4"])
def test_pcie_and_sm86_keep_the_line_rate(device: str) -> None:
    """PCIe GPUs, and SM86 whose NVLink bridge (topo.h SM86_NVLINK_BW 12.0) has no line rate in the catalog to divide."""
    dev = builtin_catalog().devices[device]
    line = link_bandwidth_for(dev, None) or 64e9
    assert nvlink_link_bandwidth(dev, line) == (line, None)


def _training_bus(device: str = "h100-sxm") -> float:
    req = parse_request(job_yaml("training", f"""\
    method: full
    settings: {{micro_batch: 1, seq_len: 2048}}
    resources: {{device: {device}, count: 8}}
    """), source="t.yaml")
    return float(make_plan(req, alternatives=False).jobs[0].section("network").value("bus_bandwidth"))


def _decode_comm(device: str = "h100-sxm", count: int = 8) -> float:
    """Seconds of all-reduce bytes in one decode step of one sequence (latency given as 0: the bandwidth term alone)."""
    dev = builtin_catalog().devices[device]
    s = estimate_speed(find("qwen2.5-72b").spec(), dev, count, weights_format="bf16", prompt_tokens=1,
                       output_tokens=64, kv_dtype="bf16", link_bandwidth=link_bandwidth_for(dev, None),
                       engine="vllm", engine_version="0.6.3", allreduce_latency=0.0)
    assert s.decode is not None
    return s.decode.comm_seconds


def test_training_and_serving_read_the_same_nvlink_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    """8 x H100 SXM: DDP's ring runs at 18 x 20.6 GB/s, and a vLLM TP-8 decode step of Qwen2.5-72B (161 all-reduces of
    8192 x 2 B = 16 KB, below 256 KB: the one-stage kernel, 7 peers read) moves its bytes at the same figure. Halving
    NCCL's SM90 per-link figure halves both: neither path holds a figure of its own."""
    msg = 8192 * 2
    assert _training_bus() == pytest.approx(NCCL_NVLINK["h100-sxm"])
    assert _decode_comm() == pytest.approx(161 * 7 * msg / NCCL_NVLINK["h100-sxm"])
    table = tuple((cc, nccl / 2 if cc == 90 else nccl, line) for cc, nccl, line in network.NCCL_NVLINK_LINK_BW)
    monkeypatch.setattr(network, "NCCL_NVLINK_LINK_BW", table)
    assert _training_bus() == pytest.approx(NCCL_NVLINK["h100-sxm"] / 2)
    assert _decode_comm() == pytest.approx(161 * 7 * msg / (NCCL_NVLINK["h100-sxm"] / 2))


def test_a_two_stage_message_moves_the_rings_volume() -> None:
    """Batch 32 on 8 x H100: 32 x 16 KB = 512 KB per all-reduce, above the 8-GPU one-stage bound (256 KB): the
    two-stage kernel, reduce-scatter + all-gather, 2 x 7 / 8 of the message at NCCL's NVLink figure."""
    dev = builtin_catalog().devices["h100-sxm"]
    s = estimate_speed(find("qwen2.5-72b").spec(), dev, 8, weights_format="bf16", prompt_tokens=1,
                       output_tokens=64, kv_dtype="bf16", link_bandwidth=link_bandwidth_for(dev, None),
                       engine="vllm", engine_version="0.6.3", allreduce_latency=0.0, concurrency=32)
    assert s.decode is not None
    assert s.decode.comm_seconds == pytest.approx(161 * 2 * 7 / 8 * 32 * 8192 * 2 / NCCL_NVLINK["h100-sxm"])
