"""A detected copy of a catalog card times exactly as the card (probe18 D1b). `hardware detect` matched a real
recorded `nvidia-smi -q` of an H100 80GB HBM3 (tests/fixtures/real_outputs/nvidia-smi-q/) to catalog h100-sxm, but
copied only some of its fields: without ``sm_count`` the detected card skipped llama.cpp's SM stream cap and decoded
219.3 tok/s beside the catalog card's 163.7. The truth each test checks is the catalog card itself."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from llmsizer.catalog.detect import NOT_FROM_CATALOG, Output, _from_catalog, detect
from llmsizer.catalog.hardware import Device, builtin_catalog, load_catalog
from llmsizer.estimate.fit import fit
from llmsizer.specs.workload import ENGINES

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs"


def _values(d: Device, name: str) -> object:
    v = getattr(d, name)
    if isinstance(v, dict):
        return {k: (x.base, x.unit) for k, x in v.items()}
    return (v.base, v.unit) if hasattr(v, "base") else v


@pytest.mark.parametrize("kind", ["gpu", "apple"])
def test_detected_entry_carries_every_field_a_rule_reads(tmp_path: Path, kind: str) -> None:
    """Every catalog GPU / Apple configuration, copied as `hardware detect` copies a matched card and loaded back from
    the hardware file, equals the card in every field but those detection measures itself (NOT_FROM_CATALOG)."""
    cat = builtin_catalog()
    devs = [d for d in cat.devices.values() if d.kind == kind]
    entries = []
    for d in devs:
        entry = {"id": f"detected-{d.id}", "name": f"{d.name} (detected)", "kind": d.kind, "owned": True,
                 "memory": {"value": 1, "unit": "GiB", "source": "detected:test"}}
        _from_catalog(entry, d, cat)
        entries.append(entry)
    doc = {"sources": {**cat.sources, "detected:test": {"title": "test", "date": "2026-12-06"}}, "devices": entries}
    f = tmp_path / "hw.json"
    f.write_text(json.dumps(doc), "utf-8")
    got = load_catalog([f]).devices
    for d in devs:
        g = got[f"detected-{d.id}"]
        for fld in dataclasses.fields(Device):
            if fld.name in NOT_FROM_CATALOG or (kind == "gpu" and fld.name == "isa"):
                continue
            assert _values(g, fld.name) == _values(d, fld.name), (d.id, fld.name)


@pytest.mark.parametrize("engine", ENGINES)
def test_detected_h100_times_as_the_catalog_h100(tmp_path: Path, engine: str) -> None:
    det = detect([Output("nvidia-smi-q", (REAL / "nvidia-smi-q/h100-80gb-hbm3.txt").read_text("utf-8"),
                         "nvidia-smi-q", "nvidia-smi-q.txt", "2026-12-01")])
    (d,) = det.devices
    assert d.catalog_id == "h100-sxm"
    f = tmp_path / "hw.json"
    f.write_text(json.dumps(det.document), "utf-8")
    weights = "q4_k_m" if engine == "llamacpp" else None
    runs = [fit("llama-3.1-8b", dev, engine=engine, weights=weights, context=4096, hardware_files=[f], fits_at=False)
            for dev in (d.id, "h100-sxm")]
    a, b = (r.speed for r in runs)
    assert a is not None and b is not None
    assert (a.decode_tokens_per_second, a.prefill_tokens_per_second, a.tokens_per_second) == (
        b.decode_tokens_per_second, b.prefill_tokens_per_second, b.tokens_per_second)
