"""``speed.speed_model``: fit ranks its tensor-parallel degrees with one model per workload and a decode-only answer
per layout, and takes the chosen layout's full answer from the same model, which keeps the decodes it computed by
layout (count, tensor_parallel, concurrency, link bandwidth, NVLink mesh). The truth for each layout is
``estimate_speed``'s own answer, computed alone: two layouts differing in one of those fields must each get their
own answer whichever is asked first, decode-only or full."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate.speed import estimate_speed, speed_model

COMMON: dict[str, Any] = {"weights_format": "bf16", "prompt_tokens": 1500, "output_tokens": 300, "engine": "vllm"}
BASE = (8, 4, 16, 450e9, True)  # count, tensor_parallel, concurrency, link bandwidth [B/s], NVLink mesh
# each differs from BASE in one field of the layout (4 GPUs without a full NVLink mesh: NCCL, not vLLM's custom
# all-reduce, engines.tp_allreduce)
OTHERS = {"count": (4, 4, 16, 450e9, True), "tensor_parallel": (8, 2, 16, 450e9, True),
          "concurrency": (8, 4, 64, 450e9, True), "link_bandwidth": (8, 4, 16, 64e9, True),
          "nvlink_mesh": (8, 4, 16, 450e9, False)}


def _alone(layout: tuple[Any, ...]) -> dict[str, Any]:
    count, tp, conc, link, mesh = layout
    return estimate_speed(find("llama-3.1-8b").spec(), builtin_catalog().devices["h100-sxm"], count,
                          tensor_parallel=tp, concurrency=conc, link_bandwidth=link, nvlink_mesh=mesh,
                          **COMMON).to_dict()


@pytest.mark.parametrize("field", sorted(OTHERS))
@pytest.mark.parametrize("decode_only_first", [True, False])
@pytest.mark.parametrize("base_first", [True, False])
def test_each_layout_gets_its_own_answer_whatever_came_first(field: str, decode_only_first: bool,
                                                             base_first: bool) -> None:
    first, second = (BASE, OTHERS[field]) if base_first else (OTHERS[field], BASE)
    alone = {first: _alone(first), second: _alone(second)}
    if field != "count":  # the count changes no decode (only the answer's count and its warning)
        assert alone[first]["decode"] != alone[second]["decode"], field  # else the test could not fail
    assert alone[first] != alone[second], field
    model = speed_model(find("llama-3.1-8b").spec(), builtin_catalog().devices["h100-sxm"], **COMMON)
    got_first = model(*first, decode_only_first)
    got_second = model(*second, False)
    assert got_second.to_dict() == alone[second], (field, "second")
    if decode_only_first:
        assert got_first.decode is not None
        assert got_first.decode.to_dict() == alone[first]["decode"], (field, "first")
        assert got_first.tokens_per_second == alone[first]["tokens_per_second"]
    else:
        assert got_first.to_dict() == alone[first], (field, "first")
    # and the first again, after the second: its own answer, not the second's
    assert model(*first, False).to_dict() == alone[first], (field, "again")


def test_decode_only_is_the_full_answers_decode() -> None:
    """A decode-only answer carries the decode alone, equal to the full answer's, for several models and loads
    (dense, MoE, a hybrid with recurrent state, llama.cpp)."""
    devices = builtin_catalog().devices
    for name, fmt, engine in (("llama-3.1-70b", "bf16", "vllm"), ("qwen3-30b-a3b", "fp8", "sglang"),
                              ("jamba-1.5-mini", "bf16", "vllm"), ("llama-3.1-8b", "gguf:q4_k_m", None)):
        spec = find(name).spec()
        for tp, conc in ((1, 1), (2, 7), (4, 64)):
            args: dict[str, Any] = {"weights_format": fmt, "prompt_tokens": 900, "output_tokens": 200,
                                    "engine": engine}
            full = estimate_speed(spec, devices["h100-sxm"], tp, concurrency=conc,
                                  link_bandwidth=450e9 if tp > 1 else None, **args)
            only = speed_model(spec, devices["h100-sxm"], **args)(tp, None, conc, 450e9 if tp > 1 else None,
                                                                  None, True)
            assert only.prefill is None and only.decode_single is None and only.assumptions == ()
            assert only.decode == full.decode, (name, tp, conc)
            assert only.tokens_per_second == full.tokens_per_second


def test_speed_setup_built_in_field_order() -> None:
    """speed_model builds its SpeedSetup positionally (62 keywords cost ~5 us of name matching per call): each
    argument is the local of the field's own name, in the order ``dataclasses.fields`` gives (the truth), so no two
    fields can be swapped."""
    import ast
    import dataclasses
    import inspect

    from llmsizer.estimate import speed

    calls = [n for n in ast.walk(ast.parse(inspect.getsource(speed))) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == "SpeedSetup"]
    assert len(calls) == 1 and not calls[0].keywords
    names = [a.id if isinstance(a, ast.Name) else ast.dump(a) for a in calls[0].args]
    wanted = [f.name for f in dataclasses.fields(speed.SpeedSetup)
              if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    assert names == wanted
