"""fit.py ``_fit_setup`` (``fit_memory``'s checks and choices before the estimate: target, engine, layout, usable
memory, device notes; no concurrency, no rate) is kept per (spec, hardware, settings, workload) in ``_FIT_SETUPS``.
A kept setup must answer exactly as one made anew: every fit below is compared, as JSON, with the same fit made
with the setup made anew at each call (``_fit_setup`` bypassed to ``_make_fit_setup``), after a warm-up that fills
the memo with the same and neighbouring deployments (other C, other rates). A fit must not change the kept setup
(its lists are each fit's own copies), and ``clear_caches`` empties the memo."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate import fit as F
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.fit import fit

# (hardware, count, fields): one device and several, an instance (its VM share), a degree given, llama.cpp split
# over GPUs with a host memory, SGLang, an engine release, vLLM's own pool share, a weight format given
CASES: list[tuple[str, int | None, dict[str, Any]]] = [
    ("h100-sxm", None, {"engine": "vllm", "context": 4096, "output_tokens": 512}),
    ("h100-sxm", 4, {"engine": "vllm", "context": 4096, "output_tokens": 512}),
    ("aws-g6.12xlarge", None, {"engine": "vllm", "context": 4096, "output_tokens": 512}),
    ("a100-80gb", 4, {"engine": "vllm", "tensor_parallel": 2, "kv_dtype": "fp8"}),
    ("rtx-4090", 2, {"engine": "llamacpp", "weights": "q4_k_m", "host_memory": "64GiB"}),
    ("h100-sxm", 2, {"engine": "sglang", "context": 8192}),
    ("h100-sxm", 8, {"engine": "vllm", "engine_version": "0.19", "gpu_memory_utilization": 0.85}),
    ("l4", 1, {"weights": "fp8", "headroom": 0.1}),
]


def _json(model: str, hw: str, n: int | None, fields: dict[str, Any], **kw: Any) -> str:
    try:
        return json.dumps(fit(model, hw, n, **fields, **kw).to_dict(), sort_keys=True, default=str)
    except Exception as e:  # noqa: BLE001 - a refusal is an answer too: its type and words compared
        return f"{type(e).__name__}: {e}"


def _answers(model: str) -> list[str]:
    out = []
    for hw, n, fields in CASES:
        for kw in ({"concurrency": 1}, {"concurrency": 24}, {"request_rate": 3}):
            out.append(_json(model, hw, n, fields, **kw))
    return out


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-30b-a3b"])
def test_a_kept_setup_answers_as_one_made_anew(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin_catalog()
    clear_caches()
    for hw, n, fields in CASES:  # the memo filled by neighbouring questions (other C, other rates) first
        for kw in ({"concurrency": 7}, {"request_rate": 1}):
            _json(model, hw, n, fields, **kw)
    assert F._FIT_SETUPS
    kept = _answers(model)
    clear_caches()
    monkeypatch.setattr(F, "_fit_setup", lambda spec, hardware, *a: F._make_fit_setup(spec, hardware, *a[:-1],
                                                                                        dict(a[-1])))
    made = _answers(model)
    assert not F._FIT_SETUPS  # (the bypass keeps nothing)
    assert kept == made


def test_a_fit_leaves_the_kept_setup_as_it_was() -> None:
    clear_caches()
    fit("llama-3.1-8b", "h100-sxm", 4, engine="vllm", context=4096, output_tokens=512, request_rate=8)
    before = {k: (v[3].warnings, v[3].assumptions, dict(v[3].workload), v[3].tp_options,
                  tuple(v[3].est_notes.assumptions), tuple(v[3].est_notes.warnings))
              for k, v in F._FIT_SETUPS.items()}
    assert before
    fit("llama-3.1-8b", "h100-sxm", 4, engine="vllm", context=4096, output_tokens=512, request_rate=8)
    after = {k: (v[3].warnings, v[3].assumptions, dict(v[3].workload), v[3].tp_options,
                 tuple(v[3].est_notes.assumptions), tuple(v[3].est_notes.warnings))
             for k, v in F._FIT_SETUPS.items() if k in before}
    assert after == before


def test_clear_caches_empties_the_kept_setups() -> None:
    fit("llama-3.1-8b", "h100-sxm", engine="vllm", concurrency=4)
    assert F._FIT_SETUPS
    clear_caches()
    assert not F._FIT_SETUPS
