"""vLLM's ``--fully-sharded-loras`` (a request's ``adapters.fully_sharded``) needs the adapter rank, and the hidden
size, to divide over the tensor-parallel ranks: vLLM 0.19.1 sizes the column-parallel layers' lora_a with
``divide(max_lora_rank, tp_size)`` (vllm/lora/layers/base_linear.py lines 47-52, column_parallel_linear.py lines
209-213, fused_moe.py lines 362-366) and the row-parallel layers' lora_b with ``divide(output_size, tp_size)``
(base_linear.py lines 55-61), where ``divide`` asserts ``numerator % denominator == 0`` (vllm/distributed/utils.py
lines 53-64): the server fails to start. The truth below is that rule written out (``_vllm_starts``), not llmsizer's."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

HIDDEN = 8192  # Llama-3.1-70B config.json hidden_size


def _vllm_starts(rank: int, tp: int) -> bool:
    """vllm/distributed/utils.py ``divide`` over the two divisions --fully-sharded-loras makes."""
    return rank % tp == 0 and HIDDEN % tp == 0


def _yaml(rank: int, tp: int, fully_sharded: bool = True) -> str:
    return "\n".join([
        "version: 1", "title: t", "jobs:", "  - name: chat", "    kind: inference", "    model: {name: llama-3.1-70b}",
        "    engine: vllm", "    quantization: none", f"    tensor_parallel: {tp}",
        f"    adapters: {{mode: dynamic, count: 8, max_loaded: 4, rank: {rank}, "
        f"fully_sharded: {str(fully_sharded).lower()}}}",
        "    traffic: {concurrency: 16, context: 4k, output: 256}", f"    resources: {{device: h100-sxm, count: {tp}}}"])


@pytest.mark.parametrize(("rank", "tp"), [(6, 4), (8, 4), (12, 8), (16, 8), (6, 2), (16, 4), (4, 8)])
def test_refused_where_vllm_would_not_start(rank: int, tp: int) -> None:
    request = parse_request(_yaml(rank, tp), source="t.yaml")
    if _vllm_starts(rank, tp):
        assert make_plan(request, alternatives=False).jobs[0].section("memory").value("adapter_slots") > 0
        return
    with pytest.raises(InputError) as e:
        make_plan(request, alternatives=False)
    text = str(e.value)
    assert "t.yaml:" in text and "adapters.fully_sharded" in text and f"rank {rank} is not a multiple of {tp}" in text
    assert "base_linear.py lines 47-52" in text and len(text.splitlines()) == 1


def test_without_fully_sharded_any_rank_is_taken() -> None:
    """Without the flag vLLM keeps the column layers' lora_a whole (max_lora_rank rows): no division."""
    job = make_plan(parse_request(_yaml(6, 4, fully_sharded=False), source="t.yaml"), alternatives=False).jobs[0]
    assert job.section("memory").value("adapter_slots") > 0
