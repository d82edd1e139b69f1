"""efficiency.OFFLOAD_HOST_MEMORY_BANDWIDTH quotes two catalog CPUs (cpus.json): one AMD EPYC Rome/Milan socket (8 x
DDR4-3200) low, the DGX A100's two of them expected, two 8-channel DDR5-4800 Sapphire Rapids sockets high. The
constant restates their bandwidths, so a catalog correction must show up here rather than leave two answers."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate import efficiency as E


def test_the_host_bandwidth_is_the_catalog_cpus() -> None:
    devices = builtin_catalog().devices
    rome = float(devices["amd-epyc-milan"].bandwidth)  # alias epyc-rome: the same 8 x DDR4-3200 socket
    spr = float(devices["intel-xeon-spr-8ch"].bandwidth)
    b = E.OFFLOAD_HOST_MEMORY_BANDWIDTH
    assert (b.low, b.expected, b.high) == (pytest.approx(rome), pytest.approx(2 * rome), pytest.approx(2 * spr))
    assert rome == pytest.approx(8 * 3200e6 * 8)  # 8 channels x DDR4-3200 x 8 B, the datasheet figure
