"""Dynamic LoRA slots on one tensor-parallel rank follow vLLM's own buffer shapes, layer kind by layer kind
(plan/inference.py ``lora_slot_bytes``, formulas/lora.py eq. 4), not the whole adapter / TP.

Truth: the stacked buffers vLLM 0.19.1 allocates per slot for a Llama decoder layer, written from its code
(vllm/lora/layers/column_parallel_linear.py ``MergedColumnParallelLinearWithLoRA.create_lora_weights`` lines
209-236, used by ``MergedQKVParallelLinearWithLoRA`` (q, k, v packed, 3 slices) and gate_up (2 slices): lora_a
[max_lora_rank, hidden] per slice, whole; lora_b [slice output on the rank, max_lora_rank]; base_linear.py lines
55-61 + row_parallel_linear.py line 27 for o_proj / down_proj: lora_a [rank, input / TP], lora_b [output, rank]
whole; ``--fully-sharded-loras`` divides the column layers' lora_a rows and the row layers' lora_b rows by TP;
QKVParallelLinear keeps max(1, kv_heads / TP) KV heads per rank, vllm/model_executor/layers/linear.py lines
1011-1017), and Llama-3.1-70B's config.json (hidden 8192, intermediate 28672, 64 heads, 8 KV heads of 128, 80
layers), bf16 buffers (2 B)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsizer.errors import InputError
from llmsizer.models import load_model
from llmsizer.plan import make_plan
from llmsizer.plan.inference import lora_slot_bytes
from llmsizer.request import parse_request

H, FF, HEADS, KV, HD, LAYERS, R = 8192, 28672, 64, 8, 128, 80, 16


def vllm_layer_elements(tp: int, fully_sharded: bool = False) -> int:
    """One slot of one decoder layer on one rank: the sum of the lora_a / lora_b shapes vLLM allocates."""
    fs = tp if fully_sharded else 1
    kv_rank = max(1, KV // tp) * HD
    shapes = [
        # qkv_proj: 3 slices of lora_a [r / fs, H]; lora_b [q shard, r], [kv shard, r] x 2
        *[(R // fs, H)] * 3, (HEADS // tp * HD, R), (kv_rank, R), (kv_rank, R),
        # o_proj (row): lora_a [r, H / tp], lora_b [H / fs, r]
        (R, HEADS * HD // tp), (H // fs, R),
        # gate_up_proj: 2 slices of lora_a [r / fs, H]; lora_b [FF / tp, r] x 2
        *[(R // fs, H)] * 2, (FF // tp, R), (FF // tp, R),
        # down_proj (row): lora_a [r, FF / tp], lora_b [H / fs, r]
        (R, FF // tp), (H // fs, R),
    ]
    return sum(a * b for a, b in shapes)


@pytest.mark.parametrize(("tp", "fully_sharded"), [(1, False), (4, False), (4, True), (8, False), (16, False),
                                                   (16, True)])
def test_one_rank_holds_vllms_buffers(tp: int, fully_sharded: bool) -> None:
    spec = load_model("llama-3.1-70b")
    want = 4 * LAYERS * vllm_layer_elements(tp, fully_sharded) * 2
    assert lora_slot_bytes(spec, R, 4, tp, 1, "vllm", fully_sharded) == want


def test_tp4_numbers() -> None:
    """4 slots of rank 16 on llama-3.1-70b at TP 4: 854,589,440 B a device (was 414,187,520 = the whole / 4, which is
    what --fully-sharded-loras holds: every buffer split once)."""
    spec = load_model("llama-3.1-70b")
    assert lora_slot_bytes(spec, R, 4, 4) == 854_589_440
    whole = LAYERS * R * (2 * (H + H) + 2 * (H + KV * HD) + 3 * (H + FF))  # PEFT eq. 1 per module, every module
    assert lora_slot_bytes(spec, R, 4, 4, fully_sharded=True) == 4 * whole * 2 // 4 == 414_187_520


def test_sglang_divides_every_b_of_a_column_layer() -> None:
    """SGLang 0.5.23 srt/lora/mem_pool.py get_lora_A_shape / get_lora_B_shape (lines 111-152): A [c r, in / TP] on
    o_proj / down_proj only, B [out / TP, r] on every other module (the qkv output divided whole: no KV replica)."""
    spec = load_model("llama-3.1-70b")
    tp = 16
    layer = (3 * R * H + R * (HEADS + 2 * KV) * HD // tp + R * HEADS * HD // tp + R * H
             + 2 * R * H + R * 2 * FF // tp + R * FF // tp + R * H)
    assert lora_slot_bytes(spec, R, 1, tp, 1, "sglang") == LAYERS * layer * 2


def _yaml(engine: str, fully_sharded: bool) -> str:
    return "\n".join([
        "version: 1", "title: t", "jobs:", "  - name: chat", "    kind: inference", "    model: {name: llama-3.1-70b}",
        f"    engine: {engine}", "    quantization: none", "    tensor_parallel: 4",
        f"    adapters: {{mode: dynamic, count: 8, max_loaded: 4, rank: 16, fully_sharded: {str(fully_sharded).lower()}}}",
        "    traffic: {concurrency: 16, context: 4k, output: 256}", "    resources: {device: h100-sxm, count: 4}"])


@pytest.mark.parametrize(("fully_sharded", "per_layer"), [(False, vllm_layer_elements(4)),
                                                          (True, vllm_layer_elements(4, True))])
def test_plan_memory_row(fully_sharded: bool, per_layer: int) -> None:
    job = make_plan(parse_request(_yaml("vllm", fully_sharded), source="t.yaml"), alternatives=False).jobs[0]
    assert job.section("memory").value("adapter_slots") == 4 * LAYERS * per_layer * 2


def test_fully_sharded_is_vllms_only(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="adapters.fully_sharded"):
        parse_request(_yaml("sglang", True), source="t.yaml")
