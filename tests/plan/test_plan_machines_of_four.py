"""Two machines of 4 A100s get one layout, one verdict and one set of figures whichever surface is asked and however
they are named (probe16 D-E, D-F). fit's figures are asked in each test (the independent truth is that the surfaces
agree with fit), plus a hand derivation of why only tensor parallel 8 holds the model.

- D-E: Qwen3-235B-A22B in bf16 on `{instance: azure-standard_nc96ads_a100_v4, count: 8}` (2 VMs of 4 A100 80GB)
  and on `{device: a100-pcie-80gb, count: 8, nodes: 2}` (the same GPUs bare): fit lays out all 8 on machines of 4
  (the instance's own count; `fit --gpus-per-node 4` for the bare GPUs). Tensor parallelism alone is TP 8 spanning
  both (`fit --pp 1`); since fitpp fit, given no layout, takes the faster of that and its staged layouts (estimate/fit.py
  with_pipeline_layouts, the rule recommend and `models --fits-on` take): TP 4 x PP 2, each stage in one machine,
  asked of fit in each test at both layouts. Before, the bare
  naming fitted one machine of 4 and called the machines replicas: TP 4 x 2, DOES NOT FIT, where the instances fit.
  The capacity check then refuses both for the fabric (a copy spanning machines that share none), not for memory.
  `{device: a100-pcie-80gb, count: 8}` (no nodes) names one machine of 8 (fit's SERVING_GPUS_PER_NODE): TP 8
  within it, and an inventory of 4-GPU nodes refuses it for node size, saying that over its 2 nodes of 4 the fabric
  binds (with a fabric, that split is the alternative).
- D-F: one "does not fit" (the model on one machine of 4) prints fit's memory line on every surface: fit, the
  plan's text and the capacity check's verdict, each figure named (memory per device of the device memory, the
  pool reserved, what this workload needs of what the pool offers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run, run_json
from llmsizer.estimate.fit import fit
from llmsizer.plan import make_plan
from llmsizer.render.fit_text import memory_line
from llmsizer.request import parse_request

A100_BYTES = 80e9  # NVIDIA A100 80GB PCIe datasheet: 80 GB HBM2e
PARAMS_235B = 235e9  # Qwen team, "Qwen3 Technical Report" (2025), Table 2: Qwen3-235B-A22B, 235B total parameters
INSTANCE = "azure-standard_nc96ads_a100_v4"  # Azure NC A100 v4: NC96ads_A100_v4 is 4 x A100 80GB PCIe
LOAD = dict(engine="vllm", weights="bf16", context=8192, concurrency=8)


def test_hand_derivation_235b_needs_eight_a100() -> None:
    weights = PARAMS_235B * 2  # bf16, every expert resident
    assert weights / 8 < A100_BYTES < weights / 4


def _request(resources: str, concurrency: int = 8) -> str:
    return ("version: 1\ntitle: probe\njobs:\n- name: j\n  kind: inference\n  model: {name: qwen3-235b-a22b}\n"
            f"  engine: vllm\n  quantization: bf16\n  resources: {resources}\n"
            f"  traffic:\n    concurrency: {{peak: {concurrency}, typical: {concurrency}}}\n"
            "    context: {peak: 8k, typical: 8k}\n")


def _plan(text: str):  # type: ignore[no-untyped-def]
    return make_plan(parse_request(text, source="r.yaml"), alternatives=False).jobs[0]


@pytest.fixture(scope="module")
def fit_two_of_four():  # type: ignore[no-untyped-def]
    return fit("qwen3-235b-a22b", INSTANCE, 8, **LOAD)  # type: ignore[arg-type]


def test_fit_takes_bare_machines_of_four_as_the_instances(fit_two_of_four) -> None:  # type: ignore[no-untyped-def]
    f = fit_two_of_four
    # tensor parallelism only (`--pp 1`): TP 8 across the two machines, said; the staged layout is faster, so fit's
    # own answer is TP 4 x PP 2 (the search's rule, with_pipeline_layouts)
    tp_only = fit("qwen3-235b-a22b", INSTANCE, 8, pipeline_parallel=1, **LOAD)  # type: ignore[arg-type]
    assert tp_only.fits and (tp_only.tensor_parallel, tp_only.replicas) == (8, 1)
    assert any("spans 2 machines of 4" in w for w in tp_only.warnings)
    staged = fit("qwen3-235b-a22b", INSTANCE, 8, pipeline_parallel=2, **LOAD)  # type: ignore[arg-type]
    assert staged.fits and staged.tokens_per_second_total > tp_only.tokens_per_second_total
    assert f.fits and (f.tensor_parallel, f.pipeline_parallel, f.replicas) == (
        staged.tensor_parallel, staged.pipeline_parallel, staged.replicas) == (4, 2, 1)
    bare = fit("qwen3-235b-a22b", "a100-pcie-80gb", 8, gpus_per_node=4, **LOAD)  # type: ignore[arg-type]
    assert (bare.fits, bare.tensor_parallel, bare.pipeline_parallel, bare.replicas) == (
        f.fits, f.tensor_parallel, f.pipeline_parallel, f.replicas)
    assert bare.memory_per_device == f.memory_per_device


def test_fit_cli_takes_gpus_per_node_for_serving(fit_two_of_four) -> None:  # type: ignore[no-untyped-def]
    code, d = run_json("fit", "qwen3-235b-a22b", "--engine", "vllm", "--weights", "bf16", "--context", "8k",
                       "--concurrency", "8", "--device", "a100-pcie-80gb", "--count", "8", "--gpus-per-node", "4")
    assert code == 0 and (d["tensor_parallel"], d["pipeline_parallel"], d["replicas"]) == (
        fit_two_of_four.tensor_parallel, fit_two_of_four.pipeline_parallel, fit_two_of_four.replicas)
    assert d["memory_per_device"] == fit_two_of_four.memory_per_device
    # fit --auto takes it too: the GPUs one llama.cpp copy is split over (estimate/fit.py llamacpp_copy)
    code, out, err = run("fit", "llama-3.1-8b", "--auto", "--device", "rtx-4090", "--count", "2", "--gpus-per-node",
                         "1")
    assert code == 0 and "auto-fit on 1 GPU(s) of one machine" in out and "(2 machines of 1 GPU)" in out, err


@pytest.mark.parametrize("resources", [f"{{instance: {INSTANCE}, count: 8}}",
                                       "{device: a100-pcie-80gb, count: 8, nodes: 2}"],
                         ids=["instances", "bare-nodes"])
def test_plan_lays_two_machines_of_four_out_as_fit(fit_two_of_four, resources: str) -> None:  # type: ignore[no-untyped-def]
    f = fit_two_of_four
    j = _plan(_request(resources))
    hw = j.hardware
    assert (hw.count, hw.nodes, hw.per_node, hw.tensor_parallel, hw.pipeline_parallel, hw.replicas) == (
        8, 2, 4, f.tensor_parallel, f.pipeline_parallel, f.replicas)
    assert j.facts["fits"] is f.fits
    assert j.facts["memory_per_device"] == f.memory_per_device
    assert j.facts["budget_per_device"] == f.budget_per_device


def test_bare_gpus_without_nodes_are_one_machine_of_eight() -> None:
    f = fit("qwen3-235b-a22b", "a100-pcie-80gb", 8, **LOAD)  # type: ignore[arg-type]
    j = _plan(_request("{device: a100-pcie-80gb, count: 8}"))
    assert (j.hardware.nodes, j.hardware.per_node) == (1, 8)
    assert (j.hardware.tensor_parallel, j.facts["fits"], j.facts["memory_per_device"]) == (
        f.tensor_parallel, f.fits, f.memory_per_device)
    assert not any("spans" in w for w in j.warnings) and not any("spans" in w for w in f.warnings)


def _inventory(fabric: bool) -> str:
    return ("version: 1\nsites:\n  - id: s1\n" + ("    fabrics: [{id: ib, bandwidth: 800 Gb/s}]\n" if fabric else "")
            + "nodes:\n  - {id: a100, count: 2, site: s1, device: a100-pcie-80gb, devices: 4, cpus: 96, ram: 880 GiB,"
            " pools: [serving]" + (", fabric: ib" if fabric else "") + "}\n"
            "storage: [{id: fs, site: s1, capacity: 100 TB}]\n")


def _check(tmp_path: Path, request: str, fabric: bool = False) -> tuple[int, dict]:
    (tmp_path / "inv.yaml").write_text(_inventory(fabric))
    (tmp_path / "r.yaml").write_text(request)
    code, d = run_json("capacity", "check", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                       "--no-db", "--now", "2027-01-01T00:00")
    d = d["jobs"]
    return code, d[0]


@pytest.mark.parametrize("resources", [f"{{instance: {INSTANCE}, count: 8}}",
                                       "{device: a100-pcie-80gb, count: 8, nodes: 2}"],
                         ids=["instances", "bare-nodes"])
def test_capacity_check_refuses_two_machines_of_four_for_the_fabric(tmp_path: Path, resources: str) -> None:
    code, c = _check(tmp_path, _request(resources))
    assert code == 1 and c["fits"] is False and c["binding"] == "fabric", c
    assert c["need"]["nodes"] == 2 and c["need"]["devices"] == 8
    # the same two nodes on one fabric hold it: memory was never what bound
    code, c = _check(tmp_path, _request(resources), fabric=True)
    assert code == 0 and c["fits"] is True, c
    assert len(c["placement"]["nodes"]) == 2


def test_capacity_check_one_machine_of_eight_is_node_size_and_says_the_fabric(tmp_path: Path) -> None:
    request = _request("{device: a100-pcie-80gb, count: 8}")
    code, c = _check(tmp_path, request)
    assert code == 1 and c["binding"] == "node-size", c
    # the same 8 over the 2 nodes of 4 that exist: what binds there is the fabric, not memory
    assert "over 2 nodes of 4" in c["reason"] and "--gpus-per-node 4" in c["reason"] and "[fabric]" in c["reason"]
    code, c = _check(tmp_path, request, fabric=True)
    assert code == 1 and c["binding"] == "node-size" and "[fabric]" not in c["reason"], c
    assert any(a.startswith("over 2 nodes of 4 devices") for a in c["alternatives"]), c["alternatives"]


def test_one_does_not_fit_prints_fits_memory_line_on_every_surface(tmp_path: Path) -> None:
    # the model on one machine of 4 (TP 4 at its 4 requests): fit's own answer and memory line
    f = fit("qwen3-235b-a22b", "a100-pcie-80gb", 4, engine="vllm", weights="bf16", context=8192, concurrency=4)
    assert not f.fits and f.memory_per_device is not None and f.budget_per_device is not None
    line = memory_line(f)
    est = f.estimate
    assert est is not None and "workload_bytes" in est.details  # vLLM: the pool pair is named in the line
    request = _request("{device: a100-pcie-80gb, count: 4}", concurrency=4)
    j = _plan(request)
    assert j.facts["fits"] is False
    assert (j.facts["memory_per_device"], j.facts["budget_per_device"]) == (f.memory_per_device, f.budget_per_device)
    (tmp_path / "r.yaml").write_text(request)
    code, out, _ = run("plan", str(tmp_path / "r.yaml"))
    assert line in out
    code, c = _check(tmp_path, request)
    assert code == 1 and c["binding"] == "memory", c
    assert line in c["reason"], c["reason"]


def test_llamacpp_on_machines_of_one_is_replicas_as_fit() -> None:
    # llama.cpp splits one model over the GPUs of one machine (no tensor parallelism); the machines are replicas
    # (specs/training.py llamacpp_split_gpus; tests/plan/test_llamacpp_split_within_machine.py): the plan's bare GPUs
    # on 2 nodes of 1 are fit's answer on machines of 1
    f = fit("llama-3.1-8b", "rtx-4090", 2, engine="llamacpp", context=8192, concurrency=4, gpus_per_node=1)
    assert not f.layer_split and f.replicas == 2
    j = _plan("version: 1\ntitle: p\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-8b}\n"
              "  engine: llamacpp\n  resources: {device: rtx-4090, count: 2, nodes: 2}\n"
              "  traffic:\n    concurrency: {peak: 4, typical: 4}\n    context: {peak: 8k, typical: 8k}\n")
    assert (j.hardware.replicas, j.facts["fits"], j.facts["memory_per_device"]) == (2, f.fits, f.memory_per_device)
    # one machine of 2 (fit's default machine for bare GPUs): one split of 2
    one = fit("llama-3.1-8b", "rtx-4090", 2, engine="llamacpp", context=8192, concurrency=4)
    assert one.layer_split and one.replicas == 1
