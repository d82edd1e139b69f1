"""The devices of one machine (``--gpus-per-node`` of fit, train, models --fits-on and recommend; a plan's devices per
node; ``gpus_per_node=`` from Python) are bounded in one home (numbers.py ``MACHINE_GPUS``) at the largest single
NVLink domain the catalog holds: a GB200 / GB300 NVL72 rack, 72 GPUs. Past it: one line, exit 2.

Before (review20 D8), only COUNT (2^20) bounded it: `recommend llama-3.1-405b --context 128k --concurrency 64
--gpus-per-node 4096` searched every count 2..4096 (21 s) and chose "4096 x rx-7800-xt" as one machine. And
`recommend --gpus-per-node N --cloud-only` was taken with no effect (it sizes bare devices; cloud instances are each
their own machine): now refused.

The truth for 72 is the catalog's own sourced text (the GB200 row's interconnect: aiconfigurator gb200.yaml, "NVLink 5
within the 72-GPU rack"), read from the data file, not from the code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import run
from llmsizer import fit
from llmsizer.errors import InputError
from llmsizer.numbers import MACHINE_GPUS
from llmsizer.specs import TrainingWorkload

DATA = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "catalog" / "data" / "hardware"
NVL72 = 72


def test_the_bound_is_the_catalogs_largest_nvlink_domain() -> None:
    rows = {r["id"]: r for r in json.loads((DATA / "accelerators.json").read_text())["devices"]}
    assert f"{NVL72}-GPU rack" in rows["gb200"]["interconnect_bandwidth"]["where"]
    assert MACHINE_GPUS.high == NVL72 and MACHINE_GPUS.low == 1


@pytest.mark.parametrize("argv", [
    ("recommend", "llama-3.1-405b", "--context", "128k", "--concurrency", "64"),
    ("fit", "llama-3.1-8b", "--device", "h100-sxm", "--count", "146"),
    ("models", "llama-3.1-8b", "--fits-on", "h100-sxm", "--count", "146"),
    ("train", "llama-3.1-8b", "--device", "h100-sxm", "--gpus", "146", "--tokens", "1B"),
])
def test_past_one_machine_every_command_refuses_in_one_line(argv: tuple[str, ...]) -> None:
    for past in (str(NVL72 + 1), "4096"):
        code, out, err = run(*argv, "--gpus-per-node", past)
        assert code == 2 and not out, (argv, out)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "--gpus-per-node" in lines[0] and "[1, 72]" in lines[0], err


def test_a_whole_nvl72_is_taken() -> None:
    code, _, err = run("fit", "llama-3.1-8b", "--device", "gb200", "--count", "144", "--gpus-per-node", "72",
                       "--engine", "vllm", "--json")
    assert code in (0, 1), err


def test_python_callers_meet_the_same_bound() -> None:
    with pytest.raises(InputError) as e:
        fit("llama-3.1-8b", "h100-sxm", 146, engine="vllm", gpus_per_node=NVL72 + 1)
    assert str(e.value).startswith("gpus_per_node: ") and "[1, 72]" in str(e.value)
    with pytest.raises(InputError) as t:
        TrainingWorkload(gpus=146, gpus_per_node=NVL72 + 1)
    assert "gpus_per_node" in str(t.value) and "[1, 72]" in str(t.value)
    assert TrainingWorkload(gpus=144, gpus_per_node=NVL72).gpus_per_node == NVL72


def test_a_plan_node_past_one_machine_is_refused_at_its_line(tmp_path: Path) -> None:
    req = tmp_path / "big.yaml"
    req.write_text("""version: 1
title: one node of 128
team: t
contact: t@example.com
jobs:
  - name: big
    kind: inference
    model: {name: llama-3.1-8b}
    resources: {device: h100-sxm, count: 128, nodes: 1}
    traffic:
      concurrency: {typical: 4, peak: 4}
      context: {typical: 8k, peak: 8k}
      output: {typical: 256, peak: 256}
    service: {duration: 1 month}
""")
    code, _, err = run("plan", str(req))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "resources.count" in err and "128 per machine, past 72" in err


@pytest.mark.parametrize("limit", [("--cloud-only",), ("--provider", "aws")])
def test_recommend_refuses_a_machine_size_where_no_bare_device_is_searched(limit: tuple[str, ...]) -> None:
    code, out, err = run("recommend", "qwen2.5-7b", "--gpus-per-node", "4", *limit)
    assert code == 2 and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--gpus-per-node" in lines[0] and limit[0] in lines[0], err
