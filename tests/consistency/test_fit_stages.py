"""``fit`` in two stages (estimate/fit.py ``fit_memory`` and its ``result``): the memory verdict first, the speed only
when asked. ``recommend`` asks the speed of a weight format only once it fits, from the same stage, instead of calling
``fit`` twice (once without speed, once with); both stages must give exactly what one ``fit`` call gives."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer import recommend as recommend_module
from llmsizer.estimate import fit as fit_module
from llmsizer.estimate import format_search
from llmsizer.estimate.fit import fit, fit_memory
from llmsizer.recommend import recommend_inference

CASES: list[tuple[str, str, int | None, dict[str, Any]]] = [
    ("llama-3.1-8b", "h100-sxm", None, {"context": 8192, "concurrency": 8}),
    ("llama-3.1-8b", "rtx-4090", None, {"weights": "gguf:q4_k_m", "context": 4096}),  # llama.cpp, output default
    ("qwen3-30b-a3b", "h100-sxm", 2, {"engine": "vllm", "context": 32768, "concurrency": 16}),
    ("llama-3.1-70b", "rtx-4090", None, {"weights": "bf16"}),  # does not fit
    ("qwen2.5-7b", "amd-epyc-9654", None, {"memory": 64 * 2**30, "output_tokens": 100}),  # a CPU, memory given
    ("llama-3.1-8b", "rtx-4090", 2, {"engine": "llamacpp", "context": 8192}),  # a llama.cpp split over two GPUs
]


@pytest.mark.parametrize(("model", "hw", "count", "kw"), CASES)
def test_two_stages_answer_as_fit(model: str, hw: str, count: int | None, kw: dict[str, Any]) -> None:
    for speed in (True, False):
        one = fit(model, hw, count, speed=speed, **kw).to_dict()
        assert fit_memory(model, hw, count, **kw).result(speed).to_dict() == one
    # one stage asked twice, without then with the speed (each result its own assumptions and warnings)
    staged = fit_memory(model, hw, count, **kw)
    assert staged.fits == fit(model, hw, count, speed=False, **kw).fits
    assert staged.result(False).to_dict() == fit(model, hw, count, speed=False, **kw).to_dict()
    assert staged.result(True).to_dict() == fit(model, hw, count, **kw).to_dict()


def test_recommend_sizes_each_rung_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each weight-format rung recommend asks about is sized once on each layout (one ``fit_memory``: fit's own,
    and each pipeline stage count the search tries, fit.with_pipeline_layouts), and ``fit`` itself is not called by
    the search (the throughput target's replicas, which call it, are not asked here)."""
    asked: list[tuple[str, Any, Any, str | None, Any]] = []
    real = fit_module.fit_memory

    def counting(*args: Any, **kw: Any) -> Any:  # a candidate is a device, a count (several cards) and a memory
        count = args[2] if len(args) > 2 else kw.get("count")
        asked.append((str(getattr(args[1], "id", args[1])), count, kw.get("memory"), kw.get("weights"),
                      kw.get("pipeline_parallel")))
        return real(*args, **kw)

    def no_fit(*args: Any, **kw: Any) -> Any:
        raise AssertionError("recommend's search called fit")

    monkeypatch.setattr(format_search, "fit_memory", counting)  # the ladder walk recommend asks (pick_format)
    monkeypatch.setattr(recommend_module, "fit", no_fit)
    rec = recommend_inference("llama-3.1-8b", context=8192, concurrency=8, quantization_advice=False)
    assert rec.options and asked
    # (the search memoizes candidates that share a device, count and memory: a repeat is a rung asked twice)
    assert len(asked) == len(set(asked))
