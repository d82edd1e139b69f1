"""recpp: recommend, `models --fits-on` and the plan's search consider pipeline layouts through fit's own layout rule.

Where fit's tensor-parallel answer does not fit within one machine, a search's option on a candidate is the fastest
(output tokens/s in total at the load, a tie to the fewest stages) of fit's answers that fit: `fit` itself (tensor
parallelism) and `fit --pp P` for every stage count P (fit choosing each stage's degree). The truth here is fit asked
by the test at every P (the stage counts written by hand: the divisors of the count up to the model's layers), not
the search's own output; engines without serving PP (llama.cpp, transformers) and a model whose layers mix cache kinds
(which the estimate refuses pipeline stages) keep fit's tensor-parallel answer, as before.
"""

from __future__ import annotations

import json

import pytest

from llmsizer import fit
from llmsizer.catalog.hardware import load_catalog
from llmsizer.cli.main import main
from llmsizer.estimate.fit import pipeline_options, serving_layout
from llmsizer.models import load_model
from llmsizer.recommend import Constraints, best_option_on, recommend_inference

P5 = "aws-p5.48xlarge"  # 8 x H100 SXM per instance: 16 devices are two instances
DEEPSEEK = "deepseek-r1"  # 61 decoder layers, MLA (one latent KV head, replicated on every TP rank)


def _answers(model, target, count, weights, engine, stages, **kw):
    """fit at the format, on tensor parallelism only (`--pp 1`: fit's own layout now takes stages itself, fitpp) and
    on each stage count given, {P: answer} (refusals left out)."""
    out = {1: fit(model, target, count, weights=weights, engine=engine, pipeline_parallel=1, **kw)}
    for p in stages:
        try:
            out[p] = fit(model, target, count, weights=weights, engine=engine, pipeline_parallel=p, **kw)
        except ValueError:
            continue
    return out


def _ranked(model, target, count, weights, engine, ranks, **kw):
    """fit at the format on each data-parallel rank count given with expert parallelism (`--dp D
    --enable-expert-parallel`, fit choosing each rank's degree: epdp3), {("dp", D): answer} (refusals left out)."""
    out = {}
    for d in ranks:
        try:
            out[("dp", d)] = fit(model, target, count, weights=weights, engine=engine, data_parallel=d,
                                 expert_parallel=True, **kw)
        except ValueError:
            continue
    return out


def _fastest(answers):
    fitting = [r for r in answers.values() if r.fits]
    return min(fitting, key=lambda r: (-(r.tokens_per_second_total or 0.0), r.pipeline_parallel, r.data_parallel))


def test_two_p5_take_tp8_pp2_fits_fastest():
    """deepseek-r1 FP8 on 16 x H100 (two p5): fit's TP 16 spans the two machines (all-reduces over EFA); TP 8 x PP 2
    is faster at one sequence, and `models --fits-on`'s option (best_option_on) is that `fit --pp 2` answer."""
    opt = best_option_on(DEEPSEEK, P5, 16, engine="vllm", context=4096, concurrency=1)
    answers = _answers(DEEPSEEK, P5, 16, "fp8-block", "vllm", (2, 4, 8, 16), context=4096, concurrency=1)
    assert answers[1].tensor_parallel == 16 and answers[1].fits  # fit's own: across the two machines
    best = _fastest(answers)
    assert (best.tensor_parallel, best.pipeline_parallel) == (8, 2)
    assert best.tokens_per_second_total > answers[1].tokens_per_second_total
    assert (opt.status, opt.weights_format, opt.tensor_parallel, opt.pipeline_parallel, opt.replicas) == (
        "meets", "fp8-block", best.tensor_parallel, best.pipeline_parallel, best.replicas)
    assert opt.memory_per_device == best.memory_per_device
    assert opt.tokens_per_second == best.tokens_per_second_total
    assert opt.layout_flags == "--tp 8 --pp 2"
    assert opt.to_dict()["pipeline_parallel"] == 2 and opt.to_dict()["layout_flags"] == "--tp 8 --pp 2"


def test_recommend_options_are_the_union_of_fit_pp_answers():
    """Every option recommend sizes on a multi-GPU instance (deepseek-r1 on vLLM, 256 x 4096: MLA's latent KV
    replicated on each of TP 8's ranks leaves no room on an 8-GPU H100 instance) is fit's answer at its format: where
    fit's TP answer fits within the machine, that one; else the fastest of fit's TP, `fit --pp P` answers and (an MoE
    on vLLM, epdp3) `fit --dp D --enable-expert-parallel` answers that fit (P, D = 2, 4, 8: the divisors of 8)."""
    rec = recommend_inference(DEEPSEEK, engine="vllm", context=4096, concurrency=256,
                              constraints=Constraints(cloud_only=True))
    cat = load_catalog()
    checked = staged = 0
    for o in (*rec.options, *rec.rejected):
        if o.tokens_per_second is None or o.count != 8 or o.instances != 1:
            continue
        inst = cat.instances[o.target]
        answers = _answers(DEEPSEEK, inst, None, o.weights_format, "vllm", (2, 4, 8), context=4096, concurrency=256)
        answers |= _ranked(DEEPSEEK, inst, None, o.weights_format, "vllm", (2, 4, 8), context=4096, concurrency=256)
        own = answers[1]
        want = own if own.fits and own.tensor_parallel <= 8 else _fastest(answers)
        assert (o.tensor_parallel, o.pipeline_parallel, o.data_parallel, o.replicas, o.memory_per_device) == (
            want.tensor_parallel, want.pipeline_parallel, want.data_parallel, want.replicas,
            want.memory_per_device), o.target
        assert o.tokens_per_second == pytest.approx(want.tokens_per_second_total), o.target
        checked += 1
        staged += o.pipeline_parallel > 1 or o.data_parallel > 1
    assert checked >= 5 and staged >= 3  # H100, H200 and A100 instances among them, some on stages


def test_engines_without_pipeline_parallelism_keep_tp_layouts():
    """llama.cpp and transformers run no serving pipeline stages (specs/workload.py PIPELINE_ENGINES): no stage count
    is offered, and the search's answer is fit's own (no --pp)."""
    spec = load_model(DEEPSEEK)
    dev = load_catalog().devices["h100-sxm"]
    for engine in ("llamacpp", "transformers"):
        assert pipeline_options(spec, serving_layout(engine, dev, 16, 8), 16) == []
    assert pipeline_options(spec, serving_layout("vllm", dev, 16, 8), 16) == [2, 4, 8, 16]
    assert pipeline_options(spec, serving_layout("sglang", dev, 16, 8), 16) == [2, 4, 8, 16]
    opt = best_option_on("llama-3.1-405b", P5, 16, engine="llamacpp", context=4096, concurrency=1)
    assert opt.pipeline_parallel == 1 and opt.layout_flags is None


def test_a_model_the_estimate_refuses_stages_keeps_fit_tp_answer():
    """gemma-3-27b mixes sliding and full attention layers: SGLang sizes those pools from the whole model's layers, so
    the estimate refuses its pipeline stages (SGLang 0.5.23 model_runner.py 1571-1579; vLLM splits them since pp3),
    and the search's option is fit's tensor-parallel answer, with no refusal of its own."""
    with pytest.raises(ValueError, match="does not split .* over pipeline stages"):
        fit("gemma-3-27b-it", "l4", 4, engine="sglang", pipeline_parallel=2)
    opt = best_option_on("gemma-3-27b-it", "l4", 4, engine="sglang", context=32768, concurrency=16)
    r = fit("gemma-3-27b-it", "l4", 4, engine="sglang", weights=opt.weights_format, context=32768, concurrency=16) \
        if opt.weights_format else None
    assert opt.pipeline_parallel == 1
    if r is not None and opt.tokens_per_second is not None:
        assert (opt.tensor_parallel, opt.memory_per_device) == (r.tensor_parallel, r.memory_per_device)


def test_a_pinned_degree_is_not_searched():
    """A degree given (the plan's request tensor_parallel, recommend's copies at a rate) is fit's answer at it."""
    opt = best_option_on(DEEPSEEK, P5, 16, engine="vllm", context=4096, concurrency=1, tensor_parallel=16)
    assert (opt.tensor_parallel, opt.pipeline_parallel) == (16, 1)


def test_cli_table_json_and_fit_hint_name_the_flags(capsys):
    code = main(["models", "deepseek-r1", "--fits-on", P5, "--count", "16", "--engine", "vllm"])
    out = capsys.readouterr().out
    assert code == 0 and "vllm --tp 8 --pp 2" in out
    main(["models", "deepseek-r1", "--fits-on", P5, "--count", "16", "--engine", "vllm", "--json"])
    (row,) = [m for m in json.loads(capsys.readouterr().out)["models"] if m["id"] == "deepseek-ai/DeepSeek-R1"]
    assert (row["tensor_parallel"], row["pipeline_parallel"], row["layout_flags"]) == (8, 2, "--tp 8 --pp 2")
    # fit's hint on two RTX 4090s for Llama-3.3-70B: the rung it names was sized on stages, said with its flags
    r = fit("llama-3.3-70b-instruct", "rtx-4090", 2, context=8192, concurrency=1)
    at = r.fits_at
    assert at is not None and at.get("pipeline_parallel") == 2
    main(["fit", "llama-3.3-70b-instruct", "--device", "rtx-4090", "--count", "2", "--context", "8192"])
    assert f"--weights {at['weights']} --tp {at['tensor_parallel']} --pp 2" in capsys.readouterr().out


def test_recommend_table_shows_the_flags(capsys):
    rec = recommend_inference(DEEPSEEK, engine="vllm", context=4096, concurrency=256,
                              constraints=Constraints(cloud_only=True))
    # a pipeline or (epdp3: an MoE on vLLM) expert-parallel option, each said with its flags
    staged = [o for o in rec.options if o.pipeline_parallel > 1 or o.data_parallel > 1]
    assert staged
    text = str(rec)
    assert f"{staged[0].devices_text} {staged[0].layout_flags}" in text


def test_a_plan_with_no_resources_is_planned_on_the_chosen_stages():
    """A request that names no hardware is planned on recommend's chosen option: a pipeline option's stages go with
    it (fit choosing each stage's degree), so the plan's layout and memory are `fit --pp P`'s there, not fit's TP."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request
    from request.helpers import job_yaml

    body = "\n".join(["model: {name: deepseek-r1}", "engine: vllm",
                      "traffic: {concurrency: {typical: 128, peak: 256}, context: {typical: 4k, peak: 4k}, "
                      "output: {typical: 256, peak: 256}}"])
    job = make_plan(parse_request(job_yaml("inference", body), source="t.yaml")).jobs[0].to_dict()
    hw = job["hardware"]
    rec = recommend_inference(DEEPSEEK, engine="vllm", context=4096, concurrency=256, output_tokens=256)
    chosen = rec.chosen
    # a pipeline option, or (epdp3: the same rule, an MoE on vLLM) an expert-parallel one: its layout goes with it
    assert chosen is not None and (chosen.pipeline_parallel > 1 or chosen.data_parallel > 1)
    assert hw["instance"] == chosen.target
    layout = ({"pipeline_parallel": chosen.pipeline_parallel} if chosen.pipeline_parallel > 1 else
              {"data_parallel": chosen.data_parallel, "expert_parallel": chosen.expert_parallel})
    r = fit(DEEPSEEK, hw["instance"], None, engine="vllm", weights=chosen.weights_format, context=4096,
            concurrency=256, output_tokens=256, **layout)
    assert r.fits
    assert (hw["tensor_parallel"], hw.get("pipeline_parallel", 1), hw.get("data_parallel", 1)) == (
        r.tensor_parallel, r.pipeline_parallel, r.data_parallel)
    assert job["memory_estimate"]["totals"]["device"]["bytes"] == r.estimate.total_bytes
    assert any(f"at {chosen.weights_format} ({chosen.layout_flags})" in str(a) for a in job["notes"])
