"""The training cost chart names each option as the options list does: the option's ``devices_text`` (one home,
estimate/fit.py), so an option of several catalog instances shows its instance count, and no label is rebuilt by
parsing text (the old parse gave ``gcp-a4-highgpu-8g`` without a count, and a device ending in "x" a doubled name).
Truth: the catalog's instance rows — azure-standard_nd96amsr_a100_v4 and aws-p4de.24xlarge have 8 A100-80GB each
(instances_azure.json, instances_aws.json), so 16 and 24 devices are 2 and 3 instances."""

from __future__ import annotations

import json

from llmsizer.catalog.hardware import load_catalog
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

from .test_checks import CLEAN_TRAIN, edit, request


def _cost_chart(resources):
    job = edit(
        CLEAN_TRAIN,
        model={"name": "llama-3.1-8b"},
        method="full",
        resources=resources,
        deadline="12h",
        dataset__tokens="2B tokens",
        checkpoints__storage=None,
    )
    jp = make_plan(parse_request(request(job), source="r.yaml"), alternatives=True).jobs[0]
    return jp, next(c for c in jp.charts if c.id.endswith("-cost"))


def test_cost_chart_categories_are_the_options_devices_lines():
    jp, chart = _cost_chart(None)
    priced = [o for o in jp.options if o["run_cost"] is not None]
    assert priced
    options = chart.categories[-len(priced) :]
    assert options == tuple(o["hardware"] for o in priced)
    cat = load_catalog()
    multi = 0
    for o, label in zip(priced, options, strict=True):
        inst = cat.instances.get(o["target"])
        if inst is None:
            continue
        n = int(label.split(" x ")[0])
        k = n // inst.device_count
        assert label.startswith(f"{n} x {inst.device.id} ({inst.id}")
        assert (f", {k} instances)" in label) == (k > 1), label
        multi += k > 1
    assert multi, options  # the 12 h deadline takes several instances of some option


def test_bare_device_ending_in_x_is_not_doubled(tmp_path):
    # a local device priced by the user's hardware file (catalog/hardware.py: a device's given ``price``) is an
    # option named by its bare id; the old parse turned "mi300x" into "mi300x xmi300x"
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps({"devices": [{"id": "mi300x", "owned": True, "price": 1.0}]}))
    job = edit(CLEAN_TRAIN, resources=None, deadline="12h", checkpoints__storage=None)
    jp = make_plan(
        parse_request(request(job), source="r.yaml", hardware_files=[hw]), hardware_files=[hw], alternatives=True
    ).jobs[0]
    chart = next(c for c in jp.charts if c.id.endswith("-cost"))
    labels = [o["hardware"] for o in jp.options if o["run_cost"] is not None]
    assert "mi300x" in labels  # one device: its id alone (estimate/fit.py devices_text)
    assert chart.categories[-len(labels) :] == tuple(labels)
    assert not any("xmi300x" in c for c in chart.categories), chart.categories
