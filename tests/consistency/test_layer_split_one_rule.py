"""One rule decides whether a llama.cpp serving answer on n > 1 devices is one model split over them (layers by
-ts proportions, one replica of TP 1: llama.cpp runs no tensor parallelism) or tensor-parallel replicas:
``estimate/engines.py`` ``llamacpp_layer_split``. ``fit`` lays its answer out by it (``FitResult.layer_split``),
recommend sizes a candidate's weights by it (its weights-alone check), the plan sizes its need by it
(``split_or_tp``) and times the typical load on the peak's layout only when that is not a split (``_fit``), and the
estimate's verdict takes the fullest GPU of a split. Each had its own variant before; the plan's was
``tensor_parallel * replicas == count``.

No case exists where that old plan rule disagreed with fit: a split is TP 1 x 1 replica on n > 1 devices (1 != n),
and every other layout has a TP that divides the count (``tensor_parallel_options``, or a given degree checked to
divide it) and count / TP replicas. So these tests check the agreement on the cases the old rule was suspected of
misreading (vLLM with TP = count, llama.cpp on one device) and on llama.cpp splits over 2 and 4 GPUs; the independent
truth is the estimate's own placement (estimate/inference/llamacpp_split.py: which GPUs hold layers)."""

from __future__ import annotations

import pytest

from llmsizer import fit
from llmsizer.plan import make_plan
from llmsizer.recommend import best_option_on
from llmsizer.request import parse_request

REQUEST = """
version: 1
jobs:
  - name: chat
    kind: inference
    model: {{name: {model}}}
    quantization: {quantization}
    engine: {engine}
    traffic: {{concurrency: {{typical: 2, peak: 4}}, context: {{typical: 2k, peak: 4k}},
              output: {{typical: 200, peak: 400}}}}
    resources: {{device: {device}, count: {count}}}
"""

# model, fit/recommend weights, the request's quantization, engine, device, count
CASES = [
    ("llama-3.1-70b-instruct", "gguf:q4_k_m", "q4_k_m", "llamacpp", "rtx-4090", 4),  # a split that fits
    ("llama-3.1-70b-instruct", "gguf:q4_k_m", "q4_k_m", "llamacpp", "rtx-4090", 2),  # a split that does not
    ("qwen2.5-7b-instruct", "gguf:q4_k_m", "q4_k_m", "llamacpp", "rtx-4090", 1),  # llama.cpp on one device
    ("llama-3.1-70b-instruct", "bf16", "none", "vllm", "h100-sxm", 4),  # vLLM, TP = count
    ("qwen2.5-7b-instruct", "bf16", "none", "vllm", "h100-sxm", 2),  # vLLM, replicas
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[3]}-{c[0]}-{c[5]}x{c[4]}")
def test_fit_recommend_and_plan_agree_on_the_split(case: tuple[str, str, str, str, str, int]) -> None:
    model, weights, quantization, engine, device, count = case
    load = dict(context=4096, concurrency=4, output_tokens=400)
    f = fit(model, device, count, engine=engine, weights=weights, **load)

    # fit's layout against the estimate's own placement: a split puts layers on every one of the count GPUs
    placed = f.estimate.details.get("split") if f.estimate is not None else None
    gpus_with_layers = sum(1 for d in placed["devices"] if d["device"] != "host" and d["n_layers"]) if placed else 1
    assert f.layer_split == (engine == "llamacpp" and count > 1)
    if f.layer_split:
        assert (f.tensor_parallel, f.replicas, gpus_with_layers) == (1, 1, count)
    else:
        assert gpus_with_layers == 1 and f.tensor_parallel * f.replicas == count
    if engine == "llamacpp":  # the verdict is the fullest GPU's need against one GPU's budget (not their sum)
        assert f.fits == (f.memory_per_device <= f.budget_per_device)
    if engine == "vllm" and model.startswith("llama-3.1-70b"):
        assert f.tensor_parallel == count  # the case named: bf16 70B needs all four H100s in one replica

    # recommend's evaluation of the same candidate: sized by fit on the same layout (not refused on its weights
    # alone, as it was when a split's weights were taken whole on one GPU)
    o = best_option_on(model, device, count, engine=engine, weights=weights, **load)
    assert o.tensor_parallel == f.tensor_parallel, o.reasons
    assert o.memory_per_device == f.memory_per_device, o.reasons
    assert (o.status != "rejected") == f.fits, o.reasons

    # the plan on the same hardware: fit's layout at the peak, no refusal of the typical load's layout (a pinned
    # TP other than 1 on a split is refused), the memory per device as fit's
    job = make_plan(parse_request(REQUEST.format(model=model, quantization=quantization, engine=engine, device=device,
                                                 count=count), source="split.yaml"), alternatives=False).job("chat")
    assert "fit_error" not in job.facts, job.facts
    assert (job.hardware.engine, job.hardware.replicas) == (engine, f.replicas)
    # fit's layout, as recommend's above (a split is TP 1: llama.cpp runs no tensor parallelism; before, the plan
    # recorded the devices one replica spans, count // replicas, under this name)
    assert job.hardware.tensor_parallel == f.tensor_parallel
    mem = next(s for s in job.sections if s.key == "memory")
    figures = {x.key: x for x in mem.figures}
    # (a pool engine's fit reports what it reserves, the plan's "reserved" figure; the others' need)
    assert figures.get("reserved", figures["need_peak"]).value == f.memory_per_device
    assert ("split" in figures["weights"].formula) == f.layer_split
    if engine == "llamacpp":  # the typical load's need, sized by the plan itself (split_or_tp): fit's at that load
        typical = fit(model, device, count, engine=engine, weights=weights, context=2048, concurrency=2,
                      output_tokens=200)
        assert figures["need_typical"].value == typical.memory_per_device
