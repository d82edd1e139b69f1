"""``batch_shapes`` (specs/training.py; estimate/allocator.py eq. R1) reaches the one estimate the same way from the
CLI, the Python API and the web API, is recorded as an assumption where it is read (metric reserved / nvidia-smi),
and a bad value is one line (exit 2, a 4xx on the web)."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli, run_cli_json

from llmsizer.estimate.training import estimate_training

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

TITAN = {"gpus": 32, "fsdp": "full", "precision": "fsdp-bf16-mixed", "micro_batch": 2, "seq_len": 8192,
         "grad_checkpointing": "selective-op"}
FLAGS = ["--gpus", "32", "--fsdp", "full", "--precision", "fsdp-bf16-mixed", "--batch", "2", "--seq", "8192",
         "--grad-checkpointing", "selective-op", "--metric", "reserved"]


def _reserve(d: dict) -> int:
    return int(next(i for i in d["items"] if i["name"] == "allocator_reserve")["bytes"])


def test_fixed_shapes_through_cli_api_and_web(client) -> None:
    api = estimate_training("llama-3.1-8b", **TITAN, metric="reserved", batch_shapes="fixed").to_dict()
    cli = run_cli_json("train", "llama-3.1-8b", *FLAGS, "--batch-shapes", "fixed")
    web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", **TITAN, "metric": "reserved",
                                             "batch_shapes": "fixed"})
    assert web.status_code == 200, web.text
    assert _reserve(api) == _reserve(cli) == _reserve(web.json())
    variable = estimate_training("llama-3.1-8b", **TITAN, metric="reserved").to_dict()
    # fixed shapes: the FSDP2 reduce-scatter stream's blocks (eq. R1), far below the calibrated fragmentation reserve
    assert 0 < _reserve(api) < _reserve(variable)
    shapes = {a["name"]: a for a in api["assumptions"]}["batch_shapes"]
    assert shapes["value"] == "fixed" and not shapes["default"]
    assert {a["name"]: a for a in variable["assumptions"]}["batch_shapes"]["default"]
    plain = estimate_training("llama-3.1-8b", **TITAN).to_dict()  # no metric: not read, not recorded
    assert "batch_shapes" not in {a["name"] for a in plain["assumptions"]}


def test_fixed_shapes_without_side_streams_keep_only_the_eager_losss_hole() -> None:
    # one GPU, no FSDP: no side-stream blocks modelled; the same shapes every step cache nothing more than the hole
    # the eager loss's [t, V] tensors leave below its gradients (formulas/loss_allocations.py): t V 2 B of bf16
    # logits (t = 2 x 2048, Llama 3's 128,256-entry vocabulary), none with fp32 logits or a chunked loss. Selective
    # recomputation: no measured run calibrates the default stream's other holes (estimate/allocator.py eq. R2)
    fixed = dict(micro_batch=2, seq_len=2048, metric="reserved", batch_shapes="fixed", grad_checkpointing="selective")
    est = estimate_training("llama-3.2-1b", **fixed)
    assert est.item("allocator_reserve").bytes == 2 * 2048 * 128256 * 2
    assert estimate_training("llama-3.2-1b", **fixed, precision="fp32").item("allocator_reserve").bytes == 0
    assert estimate_training("llama-3.2-1b", **fixed, loss_chunks=8).item("allocator_reserve").bytes == 0
    # no recomputation: eq. R2's calibrated share of the dynamic bytes on top of the hole
    none = estimate_training("llama-3.2-1b", **{**fixed, "grad_checkpointing": "none"}).item("allocator_reserve")
    assert none.bytes > 2 * 2048 * 128256 * 2 and "eq. R2" in none.formula


def test_bad_batch_shapes_is_one_line(client) -> None:
    done = run_cli("train", "llama-3.1-8b", "--batch-shapes", "ragged")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "batch-shapes" in done.stderr
    web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", "batch_shapes": "ragged"})
    assert 400 <= web.status_code < 500 and "ragged" in web.text
    with pytest.raises(Exception, match="unknown batch_shapes 'ragged'"):
        estimate_training("llama-3.1-8b", batch_shapes="ragged")
