from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from llmsizer.provider.inventory import InventoryError, load_inventory, parse_inventory, parse_time

ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
sites:
  - id: s1
    public_addresses: 2
    fabrics: [{id: f1, bandwidth: 400 Gb/s}]
nodes:
  - {id: n, count: 3, site: s1, device: h100-sxm, devices: 8, ram: 1 TiB, fabric: f1, pools: [training]}
storage:
  - {id: st, site: s1, capacity: 100 TB}
maintenance:
  - {site: s1, start: 2025-01-02, end: 2025-01-02 06:00}
"""


def errors(text: str) -> list[str]:
    with pytest.raises(InventoryError) as e:
        parse_inventory(textwrap.dedent(text), source="inv.yaml")
    return e.value.errors


def test_example_inventory_loads():
    inv = load_inventory(ROOT / "examples" / "provider" / "inventory.yaml")
    assert len(inv.nodes) == 25  # fra1 12 + 4 + 4, muc1 2 + 2, legal-dc 1
    assert {n.device for n in inv.nodes} == {"h100-sxm", "a100-pcie-80gb", "intel-xeon-spr-8ch"}
    assert inv.storage[0].capacity == 2 * 10**15


def test_good_inventory_expands_counts_and_windows():
    inv = parse_inventory(GOOD)
    assert [n.id for n in inv.nodes] == ["n-01", "n-02", "n-03"]
    assert inv.nodes[0].ram == 2**40 and inv.nodes[0].fabric == "f1"
    assert inv.maintenance[0].nodes == ("n-01", "n-02", "n-03")
    assert inv.site("s1").fabrics[0].bandwidth == 400e9 / 8


def test_unknown_device_names_closest_and_line():
    errs = errors(GOOD.replace("device: h100-sxm", "device: h100-sx"))
    assert len(errs) == 1
    assert errs[0].startswith("inv.yaml:6: ") and "unknown hardware 'h100-sx'" in errs[0] and "h100-sxm" in errs[0]


def test_node_in_no_site():
    errs = errors(GOOD.replace("site: s1, device", "device"))
    assert len(errs) == 1 and errs[0].startswith("inv.yaml:6: ") and "in no site" in errs[0]


def test_node_in_unknown_site():
    errs = errors(GOOD.replace("site: s1, device", "site: s2, device"))
    assert "inv.yaml:6:" in errs[0] and "'s2' is not a site" in errs[0]


def test_negative_counts():
    errs = errors(GOOD.replace("devices: 8", "devices: -8").replace("public_addresses: 2", "public_addresses: -1"))
    assert len(errs) == 2
    assert errs[0].startswith("inv.yaml:3: ") and "public_addresses: -1 is out of range; expected an integer in [0, 65,536]" in errs[0]
    assert errs[1].startswith("inv.yaml:6: ") and "devices: -8 is out of range; expected an integer in [0, " in errs[1]


def test_negative_capacity():
    errs = errors(GOOD.replace("capacity: 100 TB", "capacity: -100 TB"))
    assert len(errs) == 1 and errs[0].startswith("inv.yaml:8: ") and "negative" in errs[0]


def test_duplicate_ids():
    text = GOOD.replace("storage:", "  - {id: n-02, site: s1, device: l4, devices: 1, pools: [serving]}\nstorage:")
    errs = errors(text)
    assert len(errs) == 1 and errs[0].startswith("inv.yaml:7: ") and "'n-02' is used twice" in errs[0]


def test_unknown_key_and_fabric_checks():
    errs = errors(GOOD.replace("fabric: f1", "fabrik: f1"))
    assert "unknown key 'fabrik'" in errs[0] and "did you mean 'fabric'" in errs[0]
    errs = errors(GOOD.replace("fabric: f1", "fabric: f9"))
    assert "inv.yaml:6:" in errs[0] and "'f9' is not declared" in errs[0]


def test_maintenance_errors():
    errs = errors(GOOD.replace("end: 2025-01-02 06:00", "end: 2025-01-01"))
    assert errs[0].startswith("inv.yaml:10: ") and "not after the start" in errs[0]
    errs = errors(GOOD.replace("{site: s1, start", "{nodes: [n-9], start"))
    assert "'n-9' is not a node" in errs[0]


def test_errors_are_all_collected_in_line_order():
    errs = errors(GOOD.replace("device: h100-sxm", "device: nope").replace("capacity: 100 TB", "capacity: lots"))
    assert [e.split(":")[1] for e in errs] == ["6", "8"]


def test_parse_time():
    assert parse_time("2025-10-01 06:00").hour == 6
    assert parse_time("2025-10-01T06:00+02:00").hour == 4


def test_device_memory_has_one_home_the_device_entry():
    """An inventory states no device memory (issue #12/#16): a node's devices have their device entry's memory (the
    catalog's, or a --hardware-file entry overriding it), the one figure the plan, fit and the placement read. The
    reader kept a second copy (``Inventory.device_memory``, from the catalog) that nothing read; it is gone, and a
    node that states ``memory`` is told where memory is stated instead of 'unknown key'."""
    import dataclasses

    from llmsizer.provider.inventory import Inventory

    assert "device_memory" not in {f.name for f in dataclasses.fields(Inventory)}
    for key in ("memory", "device_memory"):
        errs = errors(GOOD.replace("ram: 1 TiB", f"ram: 1 TiB, {key}: 40 GiB"))
        assert len(errs) == 1 and errs[0].startswith("inv.yaml:6: nodes[0]: unknown key"), errs
        assert "device's entry" in errs[0] and "--hardware-file" in errs[0], errs
