"""`capacity import` reads every GPU entry of a node's ``Gres`` list (probe30 D3: only the first was kept, so a node
with A100s and H100s was imported as its A100s alone, the H100s dropped without a word). The truth is Slurm's
documented layout, slurm.conf(5) "Gres": a comma-delimited list of ``<name>[:<type>]:<count>`` specifications
(its example ``Gres=gpu:tesla:1,gpu:kepler:1`` is one node with two GPU types), printed by scontrol show node with
each entry's sockets, ``(S:0-1)``. The records are the real fixture's, only their Gres= changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsizer.errors import InputError
from llmsizer.provider.scheduler_import import parse_scontrol_nodes

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs"
A40 = (FIX / "scontrol-show-node" / "a40-1gpu-slinky-k8s.txt").read_text()


def _with_gres(gres: str) -> str:
    old = next(w for w in A40.split() if w.startswith("Gres="))
    return A40.replace(old, f"Gres={gres}")


def test_two_gpu_types_on_one_node_are_refused_in_one_line_naming_both():
    with pytest.raises(InputError) as e:
        parse_scontrol_nodes(_with_gres("gpu:a100:2(S:0-1),gpu:h100:2(S:2-3)"), "mix.txt")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("mix.txt:1: node 'gpunode-1' has 2 GPU types")
    assert "a100 x2" in msg and "h100 x2" in msg


def test_entries_of_one_type_add_up():
    """Two entries of one type (one per socket) are 2 + 2 = 4 GPUs of that type, not the first entry's 2."""
    (node,) = parse_scontrol_nodes(_with_gres("gpu:a100:2(S:0),gpu:a100:2(S:1)"))
    assert (node.gpu_type, node.gpus) == ("a100", 4)


def test_a_gpu_entry_after_another_gres_is_read():
    """A non-GPU GRES first (slurm.conf(5)'s example lists bandwidth after the GPUs; any order is a list) does not
    hide the GPUs; an MPS/shard entry of the same GPUs is not a GPU."""
    (node,) = parse_scontrol_nodes(_with_gres("shard:a100:8(S:0),gpu:a100:2(S:0-1)"))
    assert (node.gpu_type, node.gpus) == ("a100", 2)


def test_one_type_still_reads_as_before():
    (node,) = parse_scontrol_nodes(A40)
    assert node.gpus >= 1 and node.gpu_type is not None


def test_device_map_takes_several_mappings_comma_separated(tmp_path):
    """probe30 N2: `--device-map a100=X,h100=Y` read 'X,h100=Y' as one device. A Gres list is comma-delimited
    (slurm.conf(5) "Gres"), so no GPU type holds a comma: one flag may carry several mappings, as --pools does."""
    import yaml

    pytest.importorskip("sqlalchemy")
    from .test_cli_capacity import run
    second = _with_gres("gpu:h100:2(S:0-1)").replace("gpunode-1", "gpunode-2")
    src = tmp_path / "nodes.txt"
    src.write_text(_with_gres("gpu:a100:2(S:0-1)") + "\n" + second)
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    assert run("capacity", "import", "--scontrol", str(src), "--site", "s", "-o", str(one),
               "--device-map", "a100=a100-sxm-80gb,h100=h100-sxm") == 0
    assert run("capacity", "import", "--scontrol", str(src), "--site", "s", "-o", str(two),
               "--device-map", "a100=a100-sxm-80gb", "--device-map", "h100=h100-sxm") == 0
    rows = yaml.safe_load(one.read_text())["nodes"]
    assert [(r["id"], r["device"], r["devices"]) for r in rows] == [("gpunode-1", "a100-sxm-80gb", 2),
                                                                   ("gpunode-2", "h100-sxm", 2)]
    assert yaml.safe_load(two.read_text()) == yaml.safe_load(one.read_text())
