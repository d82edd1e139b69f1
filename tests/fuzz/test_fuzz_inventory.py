"""Fuzz the provider inventory reader (issue #15): hostile values (tags, nan/inf/huge numbers, booleans, deep
nesting) in the example inventory end in an Inventory or one InputError line per problem, bounded in time."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from llmsizer.errors import LlmsizerError
from llmsizer.provider.inventory import InventoryError, parse_inventory

ROOT = Path(__file__).resolve().parents[2]
BASE = (ROOT / "examples" / "provider" / "inventory.yaml").read_text()
SLOTS = ["public_addresses: 8", "isolated_segments: 4", "count: 12", "devices: 8", "cpus: 192", "ram: 2 TiB",
         "disk: 30 TB", "bandwidth: 3200 Gb/s", "version: 1", "provider: Example research compute"]
HOSTILE = [".nan", ".inf", "-.inf", "1e400", "1" + "0" * 400, "1" + "0" * 5000, "-1", "0", "true", "null", "2.5",
           "!!int abc", "!!int ''", "!custom 3", "!!python/name:os.system", "!!binary aGVsbG8=", "[1, 2]", "{a: 1}",
           "[" * 600 + "]" * 600, "1e400 GB", "nan TB", "inf Gb/s", "'" + "x" * 10_000 + "'", "65536", "65537"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SLOTS), st.one_of(st.sampled_from(HOSTILE), st.integers().map(str),
                                                            st.floats().map(repr), st.text(max_size=20).map(repr))),
                min_size=1, max_size=3))
def test_hostile_values_in_inventory_fields(edits: list[tuple[str, str]]) -> None:
    text = BASE
    for slot, value in edits:
        text = text.replace(slot, f"{slot.split(':')[0]}: {value}", 1)
    t = time.perf_counter()
    try:
        parse_inventory(text, source="inv.yaml")
    except InventoryError as e:
        assert e.errors and all(ln.startswith("inv.yaml") and "\n" not in ln and len(ln) < 2000 for ln in e.errors)
    except LlmsizerError as e:
        assert "\n" not in str(e) and len(str(e)) < 2000, str(e)[:300]
    assert time.perf_counter() - t < 10
