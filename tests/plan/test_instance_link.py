"""A training run's devices talk over their machine's own link: an instance's interconnect (an NVLink server of
cards that are otherwise listed on a slow link) times the gradient all-reduce, in ``training_time_on`` and the plan
alike. Before, ``training_duration_for`` read the device's interconnect only, so an 8-GPU NVLink instance of a
2 GB/s-listed card was timed at 2 GB/s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.catalog.hardware import load_catalog
from llmsizer.estimate.duration import training_time_on
from llmsizer.models import load_model
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

SLOW_LINK = 2e9  # bytes/s per direction: the device's own (a PCIe-class link)
HARDWARE = {
    "devices": [{"id": "slow-link-gpu", "name": "GPU listed on a slow link", "kind": "gpu", "form_factor": "datacenter",
                 "memory": "80GiB", "memory_bandwidth": "2000 GB/s", "flops": {"bf16": "312 TFLOP/s"},
                 "interconnect_bandwidth": "2 GB/s", "tdp": "400 W"}],
    "instances": [{"id": "nv-box-8", "name": "nv8", "provider": "test", "device": "slow-link-gpu", "device_count": 8,
                   "price": 32.0, "interconnect": "nvlink4"}],
}


@pytest.fixture()
def hw(tmp_path: Path) -> Path:
    p = tmp_path / "link-hardware.json"
    p.write_text(json.dumps(HARDWARE), "utf-8")
    return p


def test_an_instances_own_link_times_the_all_reduce(hw: Path) -> None:
    spec = load_model("qwen2.5-0.5b")
    fields = {"method": "full", "seq_len": 2048}
    nvlink = float(load_catalog([hw]).interconnect("nvlink4").bandwidth.base)  # type: ignore[union-attr]
    assert nvlink == 450e9  # NVLink 4: 900 GB/s per GPU, both directions (interconnects.json, NVIDIA H100 datasheet)
    on_box, price, cost = training_time_on(spec, "nv-box-8", 8, 1e9, fields, hardware_files=[hw])
    on_cards, _, _ = training_time_on(spec, "slow-link-gpu", 8, 1e9, fields, hardware_files=[hw])
    assert on_box.step is not None and on_cards.step is not None
    # the same gradient bytes cross each link: ring all-reduce 2 (n-1)/n x gradient bytes
    assert on_box.step.comm_bytes == on_cards.step.comm_bytes > 0
    assert on_box.step.comm_seconds == pytest.approx(on_box.step.comm_bytes / nvlink, rel=1e-12)
    assert on_cards.step.comm_seconds == pytest.approx(on_cards.step.comm_bytes / SLOW_LINK, rel=1e-12)
    assert on_box.seconds is not None and on_cards.seconds is not None and on_box.seconds < on_cards.seconds / 10
    assert price == 32.0 and cost == pytest.approx(32.0 * on_box.seconds / 3600, rel=1e-12)

    text = ("version: 1\njobs:\n  - name: tune\n    kind: training\n    model: {name: qwen2.5-0.5b}\n"
            "    method: full\n    settings: {seq_len: 2048, train_tokens: 1B}\n    dataset: {tokens: 1B}\n"
            "    resources: {instance: nv-box-8}\n")
    plan = make_plan(parse_request(text, source="t.yaml", hardware_files=[hw]), hardware_files=[hw],
                     alternatives=False)
    assert plan.jobs[0].value("duration", "seconds") == pytest.approx(on_box.seconds, rel=1e-12)
