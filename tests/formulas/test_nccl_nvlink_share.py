"""formulas/network.py eq. (12): the bus bandwidth NCCL's rings reach over NVLink, against independent truth.

- NCCL's own per-link figures (NVIDIA/nccl @069a3d4f src/graph/topo.h lines 21-26) times the links of a DGX:
  H100 SXM 18 NVLink 4 links, A100 SXM 12 NVLink 3 links (NVIDIA's data sheets: 900 / 600 GB/s bidirectional);
- measured: nccl-tests all_gather / all_reduce on 8 x H100 NVLink saturate at ~360 GB/s busbw, which NCCL's
  maintainer calls "exactly what we'd expect on H100" (NVIDIA/nccl-tests issue #326, 2025-06-24).
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import load_catalog
from llmsizer.formulas.network import nccl_nvlink_share


def _bus(device: str) -> float:
    cat = load_catalog()
    dev = cat.devices[device]
    ic = cat.interconnect(dev.interconnect)
    assert ic is not None and ic.kind == "nvlink"
    share = nccl_nvlink_share(dev.capability)
    assert share is not None
    return float(ic.bandwidth.base) * share


def test_h100_ring_bus_bandwidth_is_nccls_18_links_and_the_measured_360() -> None:
    assert _bus("h100-sxm") == pytest.approx(18 * 20.6e9)
    assert _bus("h100-sxm") == pytest.approx(360e9, rel=0.05)


def test_a100_ring_bus_bandwidth_is_nccls_12_links() -> None:
    assert _bus("a100-sxm-80gb") == pytest.approx(12 * 20.0e9)


def test_no_share_without_a_line_rate() -> None:
    assert nccl_nvlink_share(None) is None
    assert nccl_nvlink_share(86) is None
    assert nccl_nvlink_share(50) is None
