"""SMT in the VM bandwidth share: two vCPUs per physical core give half the share of the socket."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmsizer.catalog.hardware import Value, load_catalog
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.fit import vm_share_device


def test_share_counts_physical_cores() -> None:
    assert E.vm_bandwidth_share(8, 96) == pytest.approx(8 / 96)
    assert E.vm_bandwidth_share(8, 96, threads_per_core=2) == pytest.approx(4 / 96)
    assert E.vm_bandwidth_share(192, 48, threads_per_core=2) == 1.0  # capped at one socket
    with pytest.raises(ValueError):
        E.vm_bandwidth_share(8, 96, threads_per_core=0)


def test_smt_vm_gets_half_the_share_of_a_same_vcpu_non_smt_vm() -> None:
    m7a = load_catalog().instances["aws-m7a.2xlarge"]  # 8 vCPUs, SMT off (1 thread per core)
    assert m7a.threads_per_core is not None and m7a.threads_per_core.base == 1
    tpc = m7a.threads_per_core
    smt = replace(m7a, id="x-smt", threads_per_core=Value(2, tpc.unit, 2, "test", tpc.date))
    plain = vm_share_device(m7a.device, m7a).bandwidth or 0
    halved = vm_share_device(smt.device, smt).bandwidth or 0
    assert plain == pytest.approx((m7a.device.bandwidth or 0) * 8 / 96)
    assert halved == pytest.approx(plain / 2)


def test_catalog_smt_instances_and_assumption_text() -> None:
    cat = load_catalog()
    m7i = cat.instances["aws-m7i.2xlarge"]  # 8 vCPUs = 4 cores of a 48-core 8488C socket
    dev = vm_share_device(m7i.device, m7i)
    assert dev.bandwidth == pytest.approx((m7i.device.bandwidth or 0) * 4 / 48)
    assert "threads per core" in dev.memory_bandwidth.derived  # type: ignore[union-attr]
    c3d = cat.instances["gcp-c3d-standard-8"]  # 8 vCPUs = 4 cores of a 96-core Genoa socket
    assert vm_share_device(c3d.device, c3d).bandwidth == pytest.approx((c3d.device.bandwidth or 0) * 4 / 96)
    big = cat.instances["aws-m7i.48xlarge"]
    assert vm_share_device(big.device, big).bandwidth == pytest.approx(big.device.bandwidth)
    notes: list = []
    vm_share_device(m7i.device, m7i, notes)
    assert notes and "2 threads per core (aws-cpu-options)" in notes[0].why
    assert "threads_per_core" in E.VM_BANDWIDTH_SHARE_SOURCE


def test_vm_device_memo_answers_each_pair_of_its_own() -> None:
    """vm_share_device keeps one derived device per (device, instance) pair: asked again it returns that object
    (and still records its assumption); another instance of the same device (fewer vCPUs, SMT) or another device
    under the same instance never gets a stale device."""
    from llmsizer.estimate.caches import clear_caches

    clear_caches()
    m7a = load_catalog().instances["aws-m7a.2xlarge"]  # 8 vCPUs of a 96-core socket
    first = vm_share_device(m7a.device, m7a)
    notes: list = []
    assert vm_share_device(m7a.device, m7a, notes) is first and len(notes) == 1
    vc = m7a.vcpus
    assert vc is not None
    fewer = replace(m7a, vcpus=Value(4, vc.unit, 4, "test", vc.date))
    assert (vm_share_device(fewer.device, fewer).bandwidth or 0) == pytest.approx((first.bandwidth or 0) / 2)
    faster = replace(m7a.device, memory_bandwidth=replace(m7a.device.memory_bandwidth, base=2 * (m7a.device.bandwidth or 0)))
    assert (vm_share_device(faster, m7a).bandwidth or 0) == pytest.approx(2 * (first.bandwidth or 0))
    assert vm_share_device(m7a.device, m7a) is first
