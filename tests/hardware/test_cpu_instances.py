"""Cloud CPU-only instances in the built-in catalog: the seed's CPU-vs-GPU reasoning without a --hardware-file."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import load_catalog
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.fit import fit, vm_share_device
from llmsizer.recommend import Constraints, recommend_inference

# a modest interactive service: 5 tokens/s per user and the first token within 10 s
LIMITS = Constraints(cloud_only=True, user_tokens_per_second=5, max_ttft=10)


def test_the_catalog_has_cpu_instances_with_sourced_ram_bandwidth_and_price() -> None:
    cpu = [i for i in load_catalog().instances.values() if i.device.kind == "cpu"]
    assert cpu
    for inst in cpu:
        assert inst.memory is not None and inst.vcpus is not None and inst.price is not None
        assert inst.device.memory_bandwidth is not None and inst.device.cores is not None


def test_vm_bandwidth_scales_with_the_vcpu_share_of_the_socket() -> None:
    inst = load_catalog().instances["aws-m7a.2xlarge"]
    dev = vm_share_device(inst.device, inst)
    socket = inst.device.bandwidth or 0
    assert dev.bandwidth == pytest.approx(socket * 8 / 96)
    big = load_catalog().instances["aws-m7a.48xlarge"]
    assert vm_share_device(big.device, big).bandwidth == pytest.approx(socket)  # capped at one socket
    assert E.vm_bandwidth_share(8, 96) == pytest.approx(8 / 96)
    r = fit("smollm2-135m", inst, context=2048)
    assert any(a.name == E.VM_BANDWIDTH_SHARE_NAME for a in r.assumptions)


def test_tiny_model_at_low_traffic_gets_a_cloud_cpu_option() -> None:
    rec = recommend_inference("smollm2-135m", context=2048, concurrency=1, constraints=LIMITS)
    cpu = [o for o in rec.options if o.is_cpu]
    assert cpu, "no CPU instance meets the constraints"
    for o in cpu:
        assert (o.tokens_per_second_per_user or 0) >= 5 and (o.ttft_seconds or 99) <= 10
    assert rec.chosen is not None and rec.chosen.is_cpu
    assert rec.advice[0].startswith("CPU is enough")


def test_70b_at_concurrency_32_gets_no_cpu_option() -> None:
    rec = recommend_inference("llama-3.3-70b-instruct", context=4096, concurrency=32, constraints=LIMITS)
    assert not any(o.is_cpu for o in rec.options)
    assert any(o.is_cpu for o in rec.rejected)
    assert rec.chosen is not None and not rec.chosen.is_cpu
    assert rec.advice[0].startswith("Use a GPU")
