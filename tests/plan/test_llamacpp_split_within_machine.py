"""A llama.cpp split stays within one machine: the machines are replicas, each holding a whole copy over its own
GPUs (specs/training.py ``llamacpp_split_gpus``, read by estimate/fit.py ``serving_layout``). llama.cpp splits a
model over the devices of its own process (ggml-org/llama.cpp@01649e61c782 src/llama.cpp:217-263,
llama_prepare_model_devices lists the local ggml backend devices; @0c1e57098 src/llama-model.cpp:1557-1600 places the layers on them); another
machine's GPUs join only as RPC backend devices (src/llama.cpp:227-228; tools/rpc/README.md @339453e: a proof of
concept), not timed here. Before, fit laid one split over 2 x 1-GPU machines (10.41 GB per device, a warning).

Every surface is asked the same layouts and compared with fit's answer, called in the test (the independent truth
is that they agree with fit): fit, the plan, the capacity check, and recommend's one-candidate evaluation that
``models --fits-on`` prints. Plus a hand derivation of the split's weights per GPU (about half the weights each)
from Llama-3.1-8B's config.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run_json
from llmsizer.errors import FieldError
from llmsizer.estimate.fit import fit
from llmsizer.plan import make_plan
from llmsizer.recommend import best_option_on
from llmsizer.request import parse_request

LOAD = dict(engine="llamacpp", context=8192, concurrency=4)
SMALL = "llama-3.1-8b"
# Llama-3.1-70B in Q4_K_M: ~40 GiB, more than one RTX 4090 (24 GB) holds, less than two (at 2 sequences of 8k)
BIG = dict(model="llama-3.1-70b", weights="gguf:q4_k_m")
BIG_LOAD = {**LOAD, "concurrency": 2}


def _request(model: str, resources: str, quant: str = "", concurrency: int = 4) -> str:
    return ("version: 1\ntitle: p\njobs:\n- name: j\n  kind: inference\n"
            f"  model: {{name: {model}}}\n  engine: llamacpp\n" + (f"  quantization: {quant}\n" if quant else "")
            + f"  resources: {resources}\n"
            f"  traffic:\n    concurrency: {{peak: {concurrency}, typical: {concurrency}}}\n"
            "    context: {peak: 8k, typical: 8k}\n")


def _plan(text: str):  # type: ignore[no-untyped-def]
    return make_plan(parse_request(text, source="r.yaml"), alternatives=False).jobs[0]


def _check(tmp_path: Path, request: str, device: str, per_node: int) -> tuple[int, dict]:
    # 2 nodes of per_node GPUs, no fabric between them: a copy that spans machines would be refused for the fabric
    (tmp_path / "inv.yaml").write_text(
        "version: 1\nsites:\n  - id: s1\nnodes:\n"
        f"  - {{id: n, count: 2, site: s1, device: {device}, devices: {per_node}, cpus: 32, ram: 256 GiB,"
        " pools: [serving]}\nstorage: [{id: fs, site: s1, capacity: 10 TB}]\n")
    (tmp_path / "r.yaml").write_text(request)
    code, d = run_json("capacity", "check", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                       "--no-db", "--now", "2027-01-01T00:00")
    d = d["jobs"]
    return code, d[0]


@pytest.mark.parametrize("per_node", [None, 1, 2, 3, 4, 6, 8])
def test_no_copy_spans_a_machine_of_fits_own_layout(per_node: int | None) -> None:
    """The property, not the rule's output: for every count up to 40, fit on llama.cpp either refuses the shape
    (a count past one machine that is not whole machines, exit 2 naming the machine size) or lays it out so that
    copy i, on devices i g .. (i + 1) g - 1 in rank order, sits on the machine of device // machine size alone,
    the copies covering every device. The default machine is 8 (an HGX board), as a given 8."""
    size = per_node or 8
    for count in range(1, 41):
        try:
            f = fit(SMALL, "rtx-4090", count, gpus_per_node=per_node, speed=False, **LOAD)  # type: ignore[arg-type]
        except FieldError as e:
            assert count > size and count % size, (count, per_node, str(e))  # only what is not whole machines
            assert f"machines of {size} devices" in str(e)
            continue
        g = count // f.replicas
        assert g * f.replicas == count and f.tensor_parallel == 1
        for i in range(f.replicas):
            machines = {d // size for d in range(i * g, (i + 1) * g)}
            assert len(machines) == 1, (count, per_node, i, machines)
        if count <= size:  # within one machine: one copy over all of it, as llama.cpp splits its own devices
            assert f.replicas == 1


# (fit's target, count, gpus_per_node, the plan's resources, the inventory's device and GPUs per node)
TWO_OF_ONE = [("aws-g5.xlarge", 2, None, "{instance: aws-g5.xlarge, count: 2}", "a10g", 1),
              ("rtx-4090", 2, 1, "{device: rtx-4090, count: 2, nodes: 2}", "rtx-4090", 1)]


@pytest.mark.parametrize("target, count, per_node, resources, device, devices", TWO_OF_ONE,
                         ids=["instances", "bare-nodes"])
def test_two_machines_of_one_gpu_are_two_replicas_on_every_surface(
        tmp_path: Path, target: str, count: int, per_node: int | None, resources: str, device: str,
        devices: int) -> None:
    f = fit(SMALL, target, count, gpus_per_node=per_node, **LOAD)  # type: ignore[arg-type]
    assert f.fits and (f.tensor_parallel, f.replicas) == (1, 2) and not f.layer_split
    assert f.estimate is not None and "split" not in f.estimate.details  # each copy on one GPU: no split
    assert not any("--rpc" in w for w in f.warnings)  # nothing spans machines any more
    assert any(a.name == "llamacpp_split" and "RPC backend" in a.why for a in f.assumptions)
    # one copy on one GPU at its share (2 of the 4 sequences) is the same estimate as fit of that one GPU
    one = fit(SMALL, target, 1, **{**LOAD, "concurrency": 2})  # type: ignore[arg-type]
    assert f.memory_per_device == one.memory_per_device
    j = _plan(_request(SMALL, resources))
    assert (j.hardware.tensor_parallel, j.hardware.replicas) == (f.tensor_parallel, f.replicas)
    assert (j.facts["fits"], j.facts["memory_per_device"]) == (f.fits, f.memory_per_device)
    o = best_option_on(SMALL, target, count, gpus_per_node=per_node, **LOAD)  # type: ignore[arg-type]
    assert (o.status, o.replicas, o.memory_per_device, o.weights_format) == (
        "meets", f.replicas, f.memory_per_device, f.weights_format)
    code, c = _check(tmp_path, _request(SMALL, resources), device, devices)
    assert code == 0 and c["fits"] is True, c  # 2 copies of 1 machine each: no fabric needed


def test_models_fits_on_two_instances_is_fits_answer() -> None:
    f = fit(SMALL, "aws-g5.xlarge", 2, **LOAD)  # type: ignore[arg-type]
    code, d = run_json("models", SMALL, "--fits-on", "aws-g5.xlarge", "--count", "2", "--engine", "llamacpp",
                       "--context", "8k", "--concurrency", "4")
    (m,) = d["models"]
    assert code == 0 and (m["status"], m["replicas"], m["tensor_parallel"], m["memory_per_device"]) == (
        "meets", f.replicas, f.tensor_parallel, f.memory_per_device)


def test_four_gpus_on_two_machines_are_two_splits_of_two(tmp_path: Path) -> None:
    f = fit(SMALL, "rtx-4090", 4, gpus_per_node=2, **LOAD)  # type: ignore[arg-type]
    assert f.fits and f.layer_split and (f.tensor_parallel, f.replicas) == (1, 2)
    assert f.estimate is not None
    gpus = [d for d in f.estimate.details["split"]["devices"] if d["device"] != "host"]
    assert len(gpus) == 2  # one copy over one machine's 2 GPUs
    # a copy is one machine of 2 at its share of the load: fit of those 2 GPUs (fit's default machine of 8)
    one = fit(SMALL, "rtx-4090", 2, **{**LOAD, "concurrency": 2})  # type: ignore[arg-type]
    assert one.layer_split and one.replicas == 1 and f.memory_per_device == one.memory_per_device
    j = _plan(_request(SMALL, "{device: rtx-4090, count: 4, nodes: 2}"))
    assert (j.hardware.tensor_parallel, j.hardware.replicas) == (f.tensor_parallel, f.replicas)
    assert (j.facts["fits"], j.facts["memory_per_device"]) == (f.fits, f.memory_per_device)
    o = best_option_on(SMALL, "rtx-4090", 4, gpus_per_node=2, **LOAD)  # type: ignore[arg-type]
    assert (o.status, o.replicas, o.memory_per_device) == ("meets", f.replicas, f.memory_per_device)
    code, c = _check(tmp_path, _request(SMALL, "{device: rtx-4090, count: 4, nodes: 2}"), "rtx-4090", 2)
    assert code == 0 and c["fits"] is True, c


def test_hand_derivation_half_the_weights_per_gpu() -> None:
    # Llama-3.1-8B config.json (meta-llama/Llama-3.1-8B): hidden 4096, intermediate 14336, 32 layers, 32 heads and
    # 8 KV heads of 128, vocab 128256, untied output. GGUF bf16 keeps 2-D tensors in bf16 and norms in f32.
    h, inter, n_layer, kv, vocab = 4096, 14336, 32, 8 * 128, 128256
    layer = 2 * (h * h + 2 * h * kv + h * h + 3 * h * inter) + 4 * 2 * h  # q, k, v, o, gate/up/down; 2 norms
    output = 2 * vocab * h + 4 * h  # lm head + final norm, on the last GPU; the token embeddings stay on the host
    # llama.cpp splits n_layer + 1 (the output counted as a layer) by equal proportions: 33 over 2 -> 17 + 16
    gpu0, gpu1 = 17 * layer, 15 * layer + output
    f = fit(SMALL, "rtx-4090", 4, gpus_per_node=2, weights="gguf:bf16", **LOAD)  # type: ignore[arg-type]
    assert f.estimate is not None
    got = [d["weights"] for d in f.estimate.details["split"]["devices"] if d["device"] != "host"]
    assert got == [gpu0, gpu1]
    half = (n_layer * layer + output) / 2  # the weights on the GPUs / 2
    assert all(abs(w - half) / half < 0.02 for w in got)


def test_a_model_no_machine_holds_does_not_fit_on_llamacpp(tmp_path: Path) -> None:
    # ~40 GiB on machines of one 24 GB GPU: before, one split over both machines (fits); now each machine holds a
    # whole copy, which it cannot, and the reason names the RPC backend as the untimed way out
    f = fit(BIG["model"], "rtx-4090", 2, gpus_per_node=1, weights=BIG["weights"], **BIG_LOAD)  # type: ignore[arg-type]
    assert not f.fits and f.replicas == 2
    assert any("within one machine" in r and "2 machines of 1 GPU" in r and "RPC backend" in r for r in f.reasons), \
        f.reasons
    # the same 2 GPUs in one machine hold it (a split of 2)
    together = fit(BIG["model"], "rtx-4090", 2, weights=BIG["weights"], **BIG_LOAD)  # type: ignore[arg-type]
    assert together.fits and together.layer_split
    j = _plan(_request(BIG["model"], "{device: rtx-4090, count: 2, nodes: 2}", "gguf:q4_k_m", 2))
    assert (j.facts["fits"], j.hardware.replicas, j.facts["memory_per_device"]) == (False, 2, f.memory_per_device)
    o = best_option_on(BIG["model"], "rtx-4090", 2, gpus_per_node=1, weights=BIG["weights"],
                       **BIG_LOAD)  # type: ignore[arg-type]
    assert o.status == "rejected"
    code, c = _check(tmp_path, _request(BIG["model"], "{device: rtx-4090, count: 2, nodes: 2}", "gguf:q4_k_m", 2),
                     "rtx-4090", 1)
    assert code == 1 and c["binding"] == "memory", c
