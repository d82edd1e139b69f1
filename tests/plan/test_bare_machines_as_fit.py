"""12 bare GPUs (no instance, no resources.nodes) are the machines fit lays them out on: 8 + 4
(estimate/fit.py SERVING_GPUS_PER_NODE = TrainingWorkload.gpus_per_node = 8, filled in order), not 6 + 6
(probe15fixa report). Before, the plan took them for 2 machines of 6, fitted one machine of 6 and called the
machines replicas: 70B bf16 on 12 H100 came out TP 2 x 6 replicas, DOES NOT FIT, where `fit --count 12` answers
TP 4 x 3, fits. Each figure here is fit's own, asked in the test."""

from __future__ import annotations

from llmsizer.estimate.fit import fit, fit_training
from llmsizer.plan import make_plan
from llmsizer.request import parse_request


def _job(text: str):  # type: ignore[no-untyped-def]
    return make_plan(parse_request(text, source="r.yaml"), alternatives=False).jobs[0]


def _serving(resources: str) -> str:
    return ("version: 1\ntitle: p\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-70b}\n"
            f"  engine: vllm\n  quantization: bf16\n  resources: {resources}\n"
            "  traffic:\n    concurrency: {peak: 64, typical: 16}\n    context: {peak: 8k, typical: 8k}\n")


def test_twelve_bare_gpus_serve_as_fit_lays_them_out() -> None:
    f = fit("llama-3.1-70b", "h100-sxm", 12, engine="vllm", weights="bf16", context=8192, concurrency=64)
    j = _job(_serving("{device: h100-sxm, count: 12}"))
    hw = j.hardware
    assert (hw.count, hw.nodes, hw.per_node) == (12, 2, 8)  # fit's machines: 8 + 4
    assert (hw.tensor_parallel, hw.replicas) == (f.tensor_parallel, f.replicas)
    assert j.facts["fits"] is f.fits and j.facts["memory_per_device"] == f.memory_per_device


def test_named_machines_keep_their_equal_share() -> None:
    # resources.nodes given: the request's machines (6 each), not fit's size
    assert _job(_serving("{device: h100-sxm, count: 12, nodes: 2}")).hardware.per_node == 6


def test_twelve_bare_gpus_train_on_fits_machines() -> None:
    text = ("version: 1\ntitle: p\njobs:\n- name: j\n  kind: training\n  method: full\n  model: {name: llama-3.1-8b}\n"
            "  dataset: {tokens: 1B tokens}\n  resources: {device: h100-sxm, count: 12, network: 400 Gb/s}\n"
            "  settings: {fsdp: full, grad_checkpointing: full, micro_batch: 2, seq_len: 4096, "
            "train_tokens: 1B tokens}\n")
    f = fit_training("llama-3.1-8b", "h100-sxm", 12, network="400Gb/s", fsdp="full", grad_checkpointing="full",
                     micro_batch=2, seq_len=4096, tokens=1e9)
    j = _job(text)
    assert j.hardware.per_node == 8 and f.duration is not None
    assert j.facts["seconds"] == f.duration.seconds and j.facts["memory_per_device"] == f.memory_per_device
