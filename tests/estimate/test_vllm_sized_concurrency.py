"""compose.py keeps a vLLM composition with a memory (``_SIZED``, by every workload field but the concurrency) and
answers the same workload at another concurrency from it (``_resized``): the items, assumptions, warnings and
details copied, the concurrency's assumption named anew and vllm.py ``vllm_at_concurrency`` re-deriving the figures
that read the concurrency. The truth here is the composition made whole (every memo cleared first): each estimate
answered from a kept one must equal it field for field, the JSON and text included, on models of every cache kind
(full, sliding, hybrid recurrent and attention-free, which are not kept, MLA, MoE, vision), layouts, KV dtypes and
releases."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsizer.errors import InputError
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.inference import compose as C
from llmsizer.estimate.inference.compose import estimate_inference

MODELS = ["llama-3.1-8b", "qwen3-30b-a3b", "gpt-oss-20b", "gemma-3-27b-it", "qwen2.5-vl-7b-instruct",
          "falcon-h1-0.5b-instruct", "jamba-1.5-mini", "deepseek-v2-lite", "mamba-codestral-7b-v0.1",
          "gemma-4-e4b-it", "llama-4-scout-17b-16e-instruct"]
SETTINGS: list[dict[str, Any]] = [
    {"memory": 80 * 10**9, "context": 4096},
    {"memory": 24 * 10**9, "context": 8192, "kv_dtype": "fp8"},
    {"memory": 40 * 10**9, "context": 4096, "tensor_parallel": 2, "engine_version": "0.19.0"},
    {"memory": 80 * 10**9, "context": 32768, "tensor_parallel": 4, "max_num_seqs": 64},
    {"memory": 16 * 10**9, "context": 2048, "gpu_memory_utilization": 0.8},
    {"memory": 80 * 10**9, "context": 4096, "headroom": 0.2},
]


def _answer(model: str, fields: dict[str, Any]) -> str:
    """The estimate's JSON and its texts, or the refusal."""
    try:
        est = estimate_inference(model, engine="vllm", **fields)
    except InputError as e:
        return f"refused: {e}"
    return json.dumps([est.to_dict(), str(est)], default=str)


def _whole(model: str, fields: dict[str, Any]) -> str:
    clear_caches()
    return _answer(model, fields)


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), setting=st.sampled_from(SETTINGS),
       first=st.integers(1, 3000), then=st.lists(st.integers(1, 3000), min_size=1, max_size=3),
       named=st.booleans())
def test_an_estimate_at_another_concurrency_from_a_kept_composition_is_the_whole_one(
        model: str, setting: dict[str, Any], first: int, then: list[int], named: bool) -> None:
    for c in then:
        fields = {**setting, "concurrency": c} if named else {**setting}
        truth = _whole(model, fields)
        clear_caches()
        _answer(model, {**setting, "concurrency": first})  # kept at another concurrency
        kept = len(C._SIZED)
        C._MEMO.clear()  # (the finished estimates: the answer below is composed, from the kept one where any)
        assert _answer(model, fields) == truth
        if named and kept and not truth.startswith("refused"):  # (a default concurrency is another key: not given)
            assert len(C._SIZED) == kept  # answered from the kept composition, not composed anew


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gemma-3-27b-it"])
def test_the_kept_composition_is_used_and_cleared(model: str) -> None:
    clear_caches()
    fields = {"memory": 80 * 10**9, "context": 4096}
    estimate_inference(model, engine="vllm", concurrency=7, **fields)
    assert len(C._SIZED) == 1
    used = []
    resized = C._resized

    def spy(*args: Any) -> Any:
        r = resized(*args)
        used.append(r is not None)
        return r
    C._resized = spy  # type: ignore[assignment]
    try:
        est = estimate_inference(model, engine="vllm", concurrency=300, **fields)
    finally:
        C._resized = resized  # type: ignore[assignment]
    assert used == [True]
    assert est.details["concurrency"] == 300
    conc = next(a for a in est.assumptions if a.name == "concurrency")
    assert (conc.value, conc.default) == (300, False)
    assert est.details["running_sequences"] <= 300
    clear_caches()
    assert not C._SIZED


def test_no_memory_or_a_recurrent_state_is_kept() -> None:
    clear_caches()
    estimate_inference("llama-3.1-8b", engine="vllm", concurrency=3, context=4096)  # no memory: its need items
    # a hybrid's pool item quotes its running sequences' recurrent state (vllm.py compose_vllm)
    est = estimate_inference("falcon-h1-0.5b-instruct", engine="vllm", concurrency=3, context=4096,
                             memory=80 * 10**9)
    assert "x 3 seqs" in est.item("kv_cache").formula
    assert not C._SIZED
