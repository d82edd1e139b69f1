"""A user hardware file reads each repeated shorthand value (the same text or number for the same quantity) once
(catalog/hardware.py ``_Ctx.shorthand``): every device must still get the Value it gets when it is the only entry of
its own file (the truth: a file read without any repeat), whatever the quantity, text and number type, and a bad
value is refused naming the first entry that has it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from llmsizer.catalog.hardware import load_catalog
from llmsizer.errors import InputError

FIELDS = ("memory", "memory_bandwidth", "tdp", "price", "cores", "memory_channels", "flops")


def _dev(i: int, **values: Any) -> dict[str, Any]:
    return {"id": f"test-rep-{i}", "name": f"Test repeat {i}", "kind": "gpu", **values}


# the same number and text under several quantities (capacity, bandwidth, power, price, count, FLOP/s), as an int,
# a float and a string with and without its unit
DEVICES = [
    _dev(0, memory=24, memory_bandwidth=24, tdp=24, price=24, cores=24, flops={"bf16": 24}),
    _dev(1, memory=24.0, memory_bandwidth=24.0, tdp=24.0, price=24.0, cores=24, flops={"bf16": 24.0, "fp16": 24}),
    _dev(2, memory="24", memory_bandwidth="24 GB/s", tdp="24W", price="24", memory_channels=24,
         flops={"bf16": "24 TFLOP/s"}),
    _dev(3, memory="24GiB", memory_bandwidth="24", tdp="24", price=24, cores="24", flops={"bf16": "24"}),
    _dev(4, memory="24GB", memory_bandwidth="24 GB/s", tdp=24, price="24", cores=24.0, flops={"bf16": 24}),
]


def _write(path: Path, devices: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"devices": devices}), encoding="utf-8")
    return path


def test_each_device_gets_the_values_it_gets_alone(tmp_path: Path) -> None:
    both = _write(tmp_path / "all.json", DEVICES)
    path_of = str(both)
    cat = load_catalog([both])
    for i, raw in enumerate(DEVICES):
        alone_path = _write(tmp_path / f"alone{i}.json", [raw])
        alone = load_catalog([alone_path]).devices[raw["id"]]
        dev = cat.devices[raw["id"]]
        for name in FIELDS:
            got, want = getattr(dev, name), getattr(alone, name)
            if name == "flops":
                got, want = list(got.items()), list(want.items())
            else:
                got, want = [("", got)], [("", want)]
            assert [k for k, _ in got] == [k for k, _ in want], (raw["id"], name)
            for (_, g), (_, w) in zip(got, want, strict=True):
                if w is None:
                    assert g is None, (raw["id"], name)
                    continue
                assert g.source == f"user:{both.name}" and w.source == f"user:{alone_path.name}"
                assert replace(g, source="") == replace(w, source=""), (raw["id"], name)
                # the number's own type too (24 and 24.0 are equal)
                assert (type(g.raw), type(g.base)) == (type(w.raw), type(w.base)), (raw["id"], name)
        assert dev.origin == path_of and alone.origin == str(alone_path)
        assert dev.memory_bytes == alone.memory_bytes and dev.bandwidth == alone.bandwidth


def test_a_bad_repeated_value_names_its_first_entry(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad.json", [_dev(0, memory="24 parsecs"), _dev(1, memory="24 parsecs")])
    with pytest.raises(InputError, match=r"devices\[test-rep-0\]\.memory: unit .parsecs."):
        load_catalog([bad])
