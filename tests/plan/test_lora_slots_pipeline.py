"""Dynamic LoRA adapter slots of a serving job with pipeline parallelism are sized per stage: vLLM 0.19.1
``vllm/lora/model_manager.py`` ``_create_lora_modules`` (lines 363-365) walks the stage's own modules and skips each
``PPMissingLayer``, so a stage holds the A/B buffers of its own layers' projections only (plan/inference.py
``lora_slot_bytes``). Before, the whole model's slots were divided over all T x P devices, which undercounts the
stage holding more layers when the layers do not split evenly.

Truth by hand: a 3-layer Llama (hidden 64, intermediate 128, 4 heads, 2 KV heads of 16): one layer's rank-16 LoRA
on q, k, v, o, gate, up, down is 16 x ((64+64) + (64+32) + (64+32) + (64+64) + (64+128) + (64+128) + (128+64))
= 16 x 1024 = 16,384 params, 2 B each (bf16); vLLM's get_pp_indices splits 3 layers over 2 stages as [2, 1]
(the remainder to the stage before the last), SGLang's as [1, 2]: either way the binding stage holds 2 layers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.plan import make_plan
from llmsizer.request import parse_request

PER_LAYER = 16 * ((64 + 64) + (64 + 32) + (64 + 32) + (64 + 64) + (64 + 128) + (64 + 128) + (128 + 64))
# one layer on one of 2 TP ranks (vLLM lora/layers: column q/k/v/gate/up keep A [16, in] whole, B [out / 2, 16];
# row o/down A [16, in / 2], B [out, 16] whole): tests/plan/test_lora_slots_tensor_parallel.py derives it
PER_LAYER_TP2 = 16 * ((64 + 32) + (64 + 16) + (64 + 16) + (32 + 64) + (64 + 64) + (64 + 64) + (64 + 64))
SLOTS, COUNT = 3, 5
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
          "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16",
          "tie_word_embeddings": False}


def _plan(tmp_path: Path, engine: str, tp: int, pp: int):  # type: ignore[no-untyped-def]
    model = tmp_path / "tiny"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(CONFIG))
    text = "\n".join([
        "version: 1", "title: t", "jobs:", "  - name: chat", "    kind: inference", f"    model: {{name: {model}}}",
        f"    engine: {engine}", "    quantization: none", f"    tensor_parallel: {tp}", f"    pipeline_parallel: {pp}",
        f"    adapters: {{mode: dynamic, count: {COUNT}, max_loaded: {SLOTS}, rank: 16}}",
        "    traffic: {concurrency: 4, context: 2k, output: 128}",
        f"    resources: {{device: h100-sxm, count: {tp * pp}}}"])
    return make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]


@pytest.mark.parametrize(("engine", "tp", "pp", "layers"), [
    ("vllm", 1, 2, 2),    # [2, 1]: stage 0 binds (before: 3 layers / 2 devices = 1.5 layers' worth)
    ("sglang", 1, 2, 2),  # [1, 2]: stage 1 binds
    ("vllm", 2, 2, 2),    # and one TP rank's share within the stage (PER_LAYER_TP2)
    ("vllm", 2, 1, 3),    # no pipeline: every layer, one TP rank's share
    ("vllm", 1, 3, 1),    # one layer a stage
])
def test_slots_are_the_binding_stages(tmp_path: Path, engine: str, tp: int, pp: int, layers: int) -> None:
    job = _plan(tmp_path, engine, tp, pp)
    assert (job.hardware.tensor_parallel, job.hardware.pipeline_parallel) == (tp, pp)
    per_slot = layers * (PER_LAYER if tp == 1 else PER_LAYER_TP2) * 2
    assert job.section("memory").value("adapter_slots") == SLOTS * per_slot
    note = next(n for n in job.notes if n.startswith("Deploying"))
    assert f"at {per_slot / 1024:.2f} KiB of device memory per adapter slot" in note, note
    # the adapter files on disk are whole, whatever the devices that load them
    assert job.section("storage").value("adapter_files") == COUNT * 3 * PER_LAYER * 2
