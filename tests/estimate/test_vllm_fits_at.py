"""At a request rate, ``fit_memory`` ranks a several-device vLLM deployment's layouts without sizing each at its
share of every C the climb visits: each layout is sized once at one sequence and its verdict at its share derived
(inference/compose.py ``vllm_fits_at``, eq. 3 on the pool's admitted count and max_num_seqs, which read no
concurrency). Checked against the whole estimate at each concurrency (the verdict ``_check_fit`` gives), and the fit
with the derivation against the fit that sizes every layout at its share."""

from __future__ import annotations

from typing import Any

import pytest

import llmsizer.estimate.fit as F
from llmsizer.catalog.models import find
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.fit import RateOverloadError, fit, prefill_chunk_tokens
from llmsizer.estimate.inference import estimate_inference
from llmsizer.estimate.inference.compose import vllm_fits_at
from llmsizer.units import GiB as GIB

# what the layout ranking reads of the estimate it sized (fit.py speed_work, admitted_per_replica, its cap)
_READ = ("running_cap", "max_concurrency_at_context", "weights_format", "kv_dtype", "state_dtypes", "media_tokens",
         "group_size", "other_bytes", "vllm_no_pool", "engine_refusal_reason")

CASES = [  # model, memory per device, tensor parallel, weights, context: fitting, filling and past the pool
    ("llama-3.1-8b", 24 * GIB, 1, "awq-int4", 4096),
    ("llama-3.1-8b", 24 * GIB, 2, "bf16", 4096),
    ("llama-3.1-8b", 16 * GIB, 1, "bf16", 4096),  # no pool: the weights fill it
    ("llama-3.1-8b", 80 * GIB, 4, "fp8", 32768),
    ("qwen3-30b-a3b", 48 * GIB, 2, "fp8", 8192),
    ("llama-3.1-70b-instruct", 80 * GIB, 4, "bf16", 16384),
    ("llama-3.1-8b", 80 * GIB, 1, "bf16", 262144),  # past the model's window: vLLM refuses the context
    ("granite-4.0-h-tiny", 24 * GIB, 2, "bf16", 8192),  # hybrid: a recurrent state page per sequence in the pool
    ("qwen3-next-80b-a3b-thinking", 80 * GIB, 4, "fp8", 16384),
    ("gemma-3-4b-it", 16 * GIB, 1, "bf16", 32768),  # sliding layers; the profile run's images
    ("gpt-oss-20b", 24 * GIB, 1, "mxfp4", 16384),
]


@pytest.mark.parametrize("model,memory,tp,weights,context", CASES)
def test_verdict_at_any_concurrency_from_one_sequence(model: str, memory: int, tp: int, weights: str,
                                                      context: int) -> None:
    spec = find(model).spec()
    kw: dict[str, Any] = dict(engine="vllm", device="gpu", memory=memory, weights=weights, context=context,
                              **({"tensor_parallel": tp} if tp > 1 else {}))
    if model == "llama-3.1-8b" and tp == 2:  # a running cap and a utilization given
        kw.update(max_num_seqs=48, gpu_memory_utilization=0.8)
    try:
        one = estimate_inference(spec, concurrency=1, **kw)
    except Exception as e:  # a refusal to start at all is raised whatever the concurrency
        with pytest.raises(type(e)):
            estimate_inference(spec, concurrency=64, **kw)
        return
    seen = set()
    for c in (1, 2, 3, 7, 16, 31, 64, 200, 256, 257, 1000):
        est = estimate_inference(spec, concurrency=c, **kw)
        assert vllm_fits_at(one, c) == est.details["fits"], c
        seen.add(bool(est.details["fits"]))
        assert {k: one.details.get(k) for k in _READ} == {k: est.details.get(k) for k in _READ}, c
        assert prefill_chunk_tokens(one) == prefill_chunk_tokens(est)
    assert seen  # (each case's verdicts; together the cases give both)


def test_cases_give_both_verdicts() -> None:
    verdicts = set()
    for model, memory, tp, weights, context in CASES:
        spec = find(model).spec()
        for c in (1, 1000):
            try:
                est = estimate_inference(spec, engine="vllm", device="gpu", memory=memory, weights=weights,
                                         context=context, concurrency=c, **({"tensor_parallel": tp} if tp > 1 else {}))
            except Exception:
                continue
            verdicts.add(bool(est.details["fits"]))
    assert verdicts == {True, False}


def _answer(**kw: Any) -> Any:
    clear_caches()
    try:
        return fit(**kw).to_dict()
    except RateOverloadError as e:
        return ("refused", str(e))


@pytest.mark.parametrize("kw", [
    dict(model="llama-3.1-8b", hardware="l4", count=4, engine="vllm", context=4096, output_tokens=512,
         request_rate=6, fits_at=False),
    dict(model="llama-3.1-8b", hardware="a100-sxm-40gb", count=2, engine="vllm", context=4096, output_tokens=512,
         request_rate=4, weights="awq-int4", fits_at=False),
    dict(model="llama-3.1-70b-instruct", hardware="h100-sxm", count=8, engine="vllm", context=4096, request_rate=2),
    dict(model="qwen3-30b-a3b", hardware="l40s", count=4, engine="vllm", context=8192, request_rate=3,
         weights="fp8", refusal_only=True),
])
def test_fit_same_as_sizing_every_layout_at_its_share(monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any]) -> None:
    derived = _answer(**kw)
    monkeypatch.setattr(F, "vllm_fits_at", lambda est, c: None)  # not derivable: every layout sized at its share
    assert _answer(**kw) == derived


def test_speed_model_memo_same_answer_and_cleared() -> None:
    """fit_memory's speed model per (model, device, workload) is kept for the process (fit.py ``_SPEED_MODELS``): an
    answer built from a kept model is the one built anew, and ``clear_caches`` forgets it."""
    kw: dict[str, Any] = dict(model="llama-3.1-8b", hardware="aws-g6.12xlarge", engine="vllm", context=4096,
                              output_tokens=512, request_rate=5, fits_at=False)
    first = _answer(**kw)  # (cleared before: every model built anew)
    assert F._SPEED_MODELS
    F._SPEED_MEMO.clear()  # the speed estimates asked again: from the kept models
    F._CLOSED_MEMO.clear()
    F._GRID_MEMO.clear()
    F._RATE_SECONDS_MEMO.clear()
    assert fit(**kw).to_dict() == first
    clear_caches()
    assert not F._SPEED_MODELS
