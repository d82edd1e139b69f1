"""plan and `capacity check` lay the named hardware out as fit does (probe15 D1, D3, D6, D8): the same devices get
one answer whichever surface is asked and however they are named. fit's figure is computed in each test by calling
fit on the same hardware (the independent truth is that the surfaces agree), plus a hand derivation for D1.

- D1: Llama-3.1-405B in bf16 on 16 H100 (2 x aws-p5.48xlarge, or 16 bare h100-sxm): fit lays out all 16, TP 16
  spanning the two machines. Hand derivation: ~405e9 parameters x 2 bytes = 810 GB of weights; over 16 GPUs 50.6 GB
  each (< an H100's 80 GB), over one machine's 8 GPUs 101 GB each (> 80 GB): only TP 16 runs.
- D3: 16 bare H100s are 2 machines of 8 (fit's gpus_per_node), so a 400 Gb/s network is crossed and the run is timed
  as fit times it; capacity check places them on two 8-GPU nodes.
- D6: training replicas are the data-parallel degree gpus / (tp x pp x cp) (Megatron: 64 GPUs at TP 8, PP 4 are 2
  data-parallel replicas).
- D8: no quantization: the plan serves the format fit's one format rule names (fits_at), as the template says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run_json
from llmsizer.estimate.fit import fit, fit_training
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

H100_BYTES = 80e9  # NVIDIA H100 SXM5 datasheet: 80 GB HBM3
PARAMS_405B = 405e9  # Meta, "The Llama 3 Herd of Models" (2024), Table 3: 405B parameters


def _plan(tmp_path: Path, text: str) -> dict:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return make_plan(parse_request(path.read_text(), source=str(path)), alternatives=False).jobs[0].to_dict()


def _serving(resources: str, extra: str = "") -> str:
    return ("version: 1\ntitle: probe\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-405b}\n"
            f"  engine: vllm\n  quantization: bf16\n{extra}  resources: {resources}\n"
            "  traffic:\n    concurrency: {peak: 16, typical: 16}\n    context: {peak: 8k, typical: 8k}\n")


def test_hand_derivation_405b_needs_sixteen_h100() -> None:
    weights = PARAMS_405B * 2  # bf16
    assert weights / 16 < H100_BYTES < weights / 8


@pytest.fixture(scope="module")
def fit_405b():  # type: ignore[no-untyped-def]
    return fit("llama-3.1-405b", "aws-p5.48xlarge", 16, engine="vllm", weights="bf16", context=8192, concurrency=16)


@pytest.mark.parametrize("resources, extra", [
    ("{instance: aws-p5.48xlarge, count: 16}", ""),                      # q17: two instances
    ("{instance: aws-p5.48xlarge, count: 16}", "  tensor_parallel: 16\n"),  # q17b: TP 16 pinned, as fit --tp 16
    ("{device: h100-sxm, count: 16}", ""),                               # q17c: the same GPUs named bare
], ids=["instances", "tp16-pinned", "bare"])
def test_405b_on_16_h100_fits_as_fit(tmp_path: Path, fit_405b, resources: str, extra: str) -> None:  # type: ignore[no-untyped-def]
    f = fit_405b
    assert f.fits and f.tensor_parallel == 16 and f.replicas == 1  # fit's answer (probe15 D1)
    j = _plan(tmp_path, _serving(resources, extra))
    hw = j["hardware"]
    assert (hw["count"], hw["nodes"], hw["tensor_parallel"], hw["replicas"]) == (16, 2, 16, 1)
    assert j["facts"]["fits"] is True
    assert j["facts"]["memory_per_device"] == f.memory_per_device
    if "instance" in resources:
        assert j["facts"]["budget_per_device"] == f.budget_per_device
    assert any("spans 2 machines of 8" in w for w in j["warnings"])


INVENTORY = """\
version: 1
sites:
  - id: s1
    fabrics: [{id: ib, bandwidth: 3200 Gb/s}]
nodes:
  - {id: h100, count: 2, site: s1, device: h100-sxm, devices: 8, cpus: 192, ram: 2 TiB, pools: [training, serving],
     fabric: ib}
storage: [{id: fs, site: s1, capacity: 100 TB}]
"""


def _capacity_check(tmp_path: Path, request: str) -> tuple[int, dict]:
    """Exit code and the one job's verdict of `capacity check` of ``request`` on INVENTORY."""
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "r.yaml").write_text(request)
    code, d = run_json("capacity", "check", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                       "--no-db", "--now", "2027-01-01T00:00")
    d = d["jobs"]
    return code, d[0]


def test_capacity_check_405b_on_two_nodes_of_8(tmp_path: Path) -> None:
    _, c = _capacity_check(tmp_path, _serving("{device: h100-sxm, count: 16}"))
    assert c["binding"] not in ("memory", "node-size"), c
    assert c["need"]["nodes"] == 2 and c["need"]["devices"] == 16


def _training(network: str) -> str:
    return ("version: 1\ntitle: p\njobs:\n- name: j\n  kind: training\n  method: full\n  model: {name: llama-3.1-8b}\n"
            "  dataset: {tokens: 1B tokens}\n  resources: {device: h100-sxm, count: 16" + network + "}\n"
            "  settings: {fsdp: full, grad_checkpointing: full, micro_batch: 2, seq_len: 4096, "
            "train_tokens: 1B tokens}\n")


TRAIN = dict(fsdp="full", grad_checkpointing="full", micro_batch=2, seq_len=4096, tokens=1e9)


def test_bare_devices_are_fits_machines_and_cross_the_network(tmp_path: Path) -> None:
    f = fit_training("llama-3.1-8b", "h100-sxm", 16, network="400Gb/s", **TRAIN)  # type: ignore[arg-type]
    assert f.duration is not None
    j = _plan(tmp_path, _training(", network: 400 Gb/s"))
    assert j["hardware"]["nodes"] == 2 and j["hardware"]["per_node"] == 8
    assert j["facts"]["seconds"] == pytest.approx(f.duration.seconds, rel=1e-9)
    # the network is crossed: slower than the same 16 on one machine's links, as fit says it is
    alone = fit_training("llama-3.1-8b", "h100-sxm", 16, **TRAIN)  # type: ignore[arg-type]
    assert alone.duration is not None and f.duration.seconds > alone.duration.seconds


def test_capacity_check_places_16_bare_h100_on_two_nodes(tmp_path: Path) -> None:
    code, c = _capacity_check(tmp_path, _training(""))
    assert code == 0 and c["fits"] is True, c
    assert c["need"]["nodes"] == 2 and len(c["placement"]["nodes"]) == 2
    f = fit_training("llama-3.1-8b", "h100-sxm", 16, **TRAIN)  # type: ignore[arg-type]
    assert f.duration is not None and c["need"]["seconds"] == pytest.approx(f.duration.seconds, rel=1e-9)


def test_training_replicas_are_the_data_parallel_degree(tmp_path: Path) -> None:
    f = fit_training("llama-3.1-70b", "h100-sxm", 64, tp=8, pp=4)
    assert (f.tensor_parallel, f.replicas) == (8, 64 // (8 * 4))
    j = _plan(tmp_path, "version: 1\ntitle: p\njobs:\n- name: j\n  kind: training\n  method: full\n"
              "  model: {name: llama-3.1-70b}\n  dataset: {tokens: 1B tokens}\n"
              "  resources: {device: h100-sxm, count: 64}\n  settings: {tp: 8, pp: 4}\n")
    hw = j["hardware"]
    assert (hw["tensor_parallel"], hw["replicas"]) == (f.tensor_parallel, f.replicas)
    assert "copies" not in hw["label"]  # one training job over 8 machines, not copies of a model


def test_no_quantization_takes_fits_format(tmp_path: Path) -> None:
    f = fit("llama-3.1-8b", "rtx-5060-ti-8gb", context=8192, concurrency=1, fits_at=True)
    assert not f.fits and f.fits_at and f.fits_at["same_engine"]
    at = fit("llama-3.1-8b", "rtx-5060-ti-8gb", context=8192, concurrency=1, weights=f.fits_at["weights"])
    j = _plan(tmp_path, "version: 1\ntitle: probe\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-8b}\n"
              "  resources: {device: rtx-5060-ti-8gb}\n"
              "  traffic:\n    concurrency: {peak: 1, typical: 1}\n    context: {peak: 8k, typical: 8k}\n")
    assert j["facts"]["fits"] is True and j["facts"]["memory_per_device"] == at.memory_per_device
    weights = [a for a in j["assumptions"] if a["name"] == "weights"]
    assert weights and weights[0]["value"] == f.fits_at["weights"] and "no quantization given" in weights[0]["why"]
