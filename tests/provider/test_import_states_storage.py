"""`capacity import` from REAL scheduler outputs (tests/fixtures/real_outputs, sources in the README there): nodes
Slurm says take no new jobs are not bookable, the missing storage is said, an existing inventory is not overwritten
without --force, sinfo output is named as such, and the schedulable CPU count is CPUEfctv."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmsizer.provider.inventory import parse_inventory
from llmsizer.provider.scheduler_import import SlurmNode, parse_scontrol_nodes

pytest.importorskip("sqlalchemy")
from .test_cli_capacity import run  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs"
A40 = FIX / "scontrol-show-node" / "a40-1gpu-slinky-k8s.txt"
SINFO = FIX / "sinfo" / "osc-a100-gres-gresused.txt"


def _node(state: str) -> SlurmNode:
    return SlurmNode("n", "a100", 1, 1, 1, (), state, ())


def test_slurm_states_read_from_a_real_sinfo_listing():
    """The long state names of a real `sinfo -O ...statelong` listing (the last column): drained and draining nodes
    take no new jobs (sinfo(1) NODE STATE CODES); idle, mixed, allocated, completing and reserved nodes do (a busy
    node is bookable later: the inventory holds capacity, bookings hold time)."""
    states = {line.split()[0]: line.split()[-1] for line in SINFO.read_text().splitlines() if line.strip()}
    assert states["a0235"] == "drained*" and states["a0133"] == "draining@"
    down = {n for n, s in states.items() if _node(s).unavailable}
    assert down == {"a0235", "a0133"}
    assert "drained" in _node(states["a0235"]).unavailable and "not responding" in _node(states["a0235"]).unavailable
    # scontrol's form: base state + flags (the real record's State=IDLE+DYNAMIC_NORM is bookable)
    (real,) = parse_scontrol_nodes(A40.read_text())
    assert real.state == "IDLE+DYNAMIC_NORM" and not real.unavailable
    for state in ("DOWN+DRAIN", "IDLE+DRAIN", "MIXED+DRAIN", "DOWN+NOT_RESPONDING", "IDLE+MAINT", "FAIL", "FUTURE"):
        assert _node(state).unavailable, state


def _two_nodes(tmp_path: Path, state: str) -> Path:
    """The real record, and a second node made from it by Slurm's own layout (renamed, State= changed), as the
    --oneliner derivation in test_scheduler_handover.py does."""
    text = A40.read_text()
    second = text.replace("gpunode-1", "gpunode-2").replace("State=IDLE+DYNAMIC_NORM", f"State={state}")
    assert second.count(f"State={state}") == 1
    p = tmp_path / "nodes.txt"
    p.write_text(text + "\n" + second)
    return p


def test_a_down_node_is_not_bookable(tmp_path, capsys):
    inv = tmp_path / "inv.yaml"
    src = _two_nodes(tmp_path, "DOWN+DRAIN")
    assert run("capacity", "import", "--scontrol", str(src), "--site", "s", "-o", str(inv)) == 0
    err = capsys.readouterr().err
    assert "gpunode-2: State=DOWN+DRAIN (down, drained by the administrator), written out_of_service" in err
    data = yaml.safe_load(inv.read_text())
    assert [n["id"] for n in data["nodes"]] == ["gpunode-1", "gpunode-2"]  # the catalog's a40: no --device-map needed
    assert data["nodes"][0]["device"] == "a40" and data["nodes"][0]["cpus"] == 11
    assert "out_of_service" not in data["nodes"][0]
    assert data["nodes"][1]["out_of_service"] == "State=DOWN+DRAIN (down, drained by the administrator)"
    nodes = parse_inventory(inv.read_text(), source="inv.yaml").nodes
    assert [(n.id, bool(n.out_of_service)) for n in nodes] == [("gpunode-1", False), ("gpunode-2", True)]
    # every GPU node out of service (probe10 #7: the message said "written commented out" and no file was
    # written): the inventory is written with the node out of service, as said, and the import exits 1 (nothing can
    # be booked); a drained node is still the provider's (probe30 D5), so its row reads back and keeps its bookings
    only = tmp_path / "down.txt"
    only.write_text(A40.read_text().replace("State=IDLE+DYNAMIC_NORM", "State=DOWN+DRAIN"))
    out = tmp_path / "x.yaml"
    assert run("capacity", "import", "--scontrol", str(only), "--site", "s", "-o", str(out)) == 1
    err = capsys.readouterr().err
    assert "gpunode-1: State=DOWN+DRAIN (down, drained by the administrator), written out_of_service" in err
    assert "no bookable node at site s" in err
    text = out.read_text()
    (row,) = yaml.safe_load(text)["nodes"]
    assert row["id"] == "gpunode-1" and row["out_of_service"].startswith("State=DOWN+DRAIN")
    # the operator's step the file names: delete out_of_service: -> the node is bookable again
    back = "\n".join(ln.replace(', out_of_service: "State=DOWN+DRAIN (down, drained by the administrator)"', "")
                     for ln in text.splitlines())
    assert [(n.id, n.out_of_service) for n in parse_inventory(back, source="back.yaml").nodes] == [("gpunode-1", "")]
    from llmsizer.errors import InputError
    from llmsizer.provider.scheduler_import import inventory_yaml
    with pytest.raises(InputError, match=r"no node with a gpu GRES$"):  # no GPU node at all: nothing to write
        inventory_yaml([], site="s", device_map={}, pools=(), known={"a40"})


def test_import_says_storage_is_missing_and_the_check_says_what_to_add(tmp_path, capsys):
    inv = tmp_path / "inv.yaml"
    assert run("capacity", "import", "--scontrol", str(A40), "--site", "lab", "--pools", "serving", "-o", str(inv)) == 0
    err = capsys.readouterr().err
    assert "no shared storage was imported" in err and "storage: [{id: fs, site: lab" in err
    assert "# no shared storage was imported" in inv.read_text()
    # nor fabrics (probe10 defect 4): said in the file and on stderr, naming what a multi-node training check answers
    assert "no fabrics were imported" in err and "these nodes state no fabric:" in err
    assert "# no fabrics were imported" in inv.read_text()
    req = tmp_path / "req.yaml"
    req.write_text("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: qwen2.5-0.5b}\n"
                   "    traffic: {concurrency: {typical: 2}, context: {typical: 2k}}\n"
                   "    service: {duration: 7 days}\n    resources: {device: a40, count: 1}\n    start: 2026-02-01\n")
    assert run("capacity", "check", str(req), "--inventory", str(inv), "--no-db", "--now", "2026-01-15") == 1
    out = capsys.readouterr().out
    assert "[storage] site lab has no shared storage pool: the inventory lists none there (add storage:" in out


def test_existing_output_needs_force(tmp_path, capsys):
    inv = tmp_path / "inv.yaml"
    inv.write_text("# hand-edited\n")
    base = ("capacity", "import", "--scontrol", str(A40), "--site", "s", "-o", str(inv))
    assert run(*base) == 2
    assert inv.read_text() == "# hand-edited\n"
    assert run(*base, "--force") == 0
    assert "gpunode-1" in inv.read_text()


def test_sinfo_output_is_named_with_the_command_to_run(tmp_path):
    from llmsizer.errors import InputError
    with pytest.raises(InputError, match=r"looks like `sinfo` output.*save `scontrol show node`"):
        parse_scontrol_nodes(SINFO.read_text(), str(SINFO))
    assert run("capacity", "import", "--scontrol", str(SINFO), "--site", "s", "-o", str(tmp_path / "i.yaml")) == 2


def test_an_untyped_gres_is_named_and_mapped_with_question_mark(tmp_path, capsys):
    """probe27 D2: `Gres=gpu:1` (no Type in gres.conf) was refused as "GPU type(s) ? are not catalog devices" and
    `--device-map '?=a40'` gave the same error. The error names the untyped case and the form that maps it, and that
    form works (as does the empty key '=a40', read the same)."""
    from llmsizer.errors import InputError
    from llmsizer.provider.scheduler_import import inventory_yaml
    text = A40.read_text()
    assert "gpu:a40:1(S:0,2,4,6,8,10)" in text
    src = tmp_path / "untyped.txt"
    src.write_text(text.replace("gpu:a40:1(S:0,2,4,6,8,10)", "gpu:1"))
    (node,) = parse_scontrol_nodes(src.read_text())
    assert node.gpu_type is None and node.gpus == 1
    with pytest.raises(InputError, match=r"gpunode-1 have an untyped GPU GRES \(Gres=gpu:N.*--device-map '\?=DEVICE'"):
        inventory_yaml([node], site="s", device_map={}, pools=("serving",), known={"a40"})
    assert run("capacity", "import", "--scontrol", str(src), "--site", "s", "-o", str(tmp_path / "x.yaml")) == 2
    for spelling in ("?=a40", "=a40", "?=nvidia-a40"):
        inv = tmp_path / f"inv{len(spelling)}.yaml"
        assert run("capacity", "import", "--scontrol", str(src), "--site", "s", "--device-map", spelling,
                   "-o", str(inv)) == 0, spelling
        (row,) = yaml.safe_load(inv.read_text())["nodes"]
        assert row["device"] == "a40" and row["devices"] == 1
