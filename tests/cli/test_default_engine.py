"""One default engine: with no engine given, a serving workload on a device runs on the engine of ONE rule
(estimate/device.py ``engine_rule``: the engine of the requested format, else vLLM on data-center accelerators and
several devices, llama.cpp on Apple, CPUs and one consumer card; one GPU known only by its kind: transformers), and
`infer --device X`, `fit --device X`, the web API (its body is the CLI's, tests/web/api) and the Python API's
``estimate_inference(device=X)`` answer the same: the same engine, the same totals, the same budget, the same verdict,
the engine recorded as ``engine=<name> (default for <device>: <reason>)``.

Before: `infer` defaulted to transformers while `fit` used the per-device rule, so `infer llama-3.1-8b --device
rtx-4090` sized transformers (16.40 GiB) and `fit` llama.cpp (15.23 GiB) for the same question; the Python API took
only 'gpu'/'cpu' as its device; a CPU instance's RAM as the budget was labelled "given".
"""

from __future__ import annotations

import json

import pytest
from cli_run import answer, run, totals

import llmsizer
from llmsizer.catalog.hardware import load_catalog
from llmsizer.estimate.device import engine_rule
from llmsizer.specs import InferenceWorkload

MODEL = "llama-3.2-1b"

# (device, --memory or None): a consumer card, a data-center card, a CPU, an Apple chip, a CPU instance, the two
# devices known only by their kind
DEVICES = [("rtx-4090", None), ("h100-sxm", None), ("intel-xeon-platinum-8488c", "64GiB"),
           ("apple-m3-max-36gb", None), ("aws-m7i.4xlarge", None), ("cpu", "32GiB"), ("gpu", "24GiB")]


def assumed(d: dict) -> dict[str, dict]:
    return {a["name"]: a for a in d["assumptions"]}


def expected_engine(device: str) -> str:
    """The engine the rule's statement names for the catalog device's kind and form factor (not our output)."""
    dev = load_catalog().device(device)
    if dev.kind in ("cpu", "apple"):
        return "llamacpp"
    if dev.origin == "generic":
        return "transformers"
    return "vllm" if dev.form_factor == "datacenter" else "llamacpp"


@pytest.mark.parametrize("device, memory", DEVICES)
@pytest.mark.parametrize("workload", [["--context", "4096"], ["--context", "32k", "--concurrency", "8"]])
def test_infer_with_no_engine_answers_what_fit_answers(device, memory, workload, capsys):
    mem = ["--memory", memory] if memory else []
    code_i, inf = answer(["infer", MODEL, "--device", device, *mem, *workload], capsys)
    code_f, fit = answer(["fit", MODEL, "--device", device, *mem, *workload], capsys)
    engine = assumed(inf)["engine"]
    assert engine["value"] == fit["engine"] == expected_engine(device)
    assert engine["default"] and engine["why"].startswith("default for ")
    assert engine == assumed(fit)["engine"]  # one rule, one sentence
    assert totals(inf) == totals(fit["memory"])
    assert inf["details"]["memory_budget"] == fit["budget_per_device"]
    assert inf["details"]["fits"] == fit["fits"] and code_i == code_f


def test_a_verdict_that_differed_now_agrees(capsys):
    """llama-3.1-8b at 32k x 4 on an RTX 4090: transformers (infer's old default) and llama.cpp (fit's) need
    different memory; with no engine both commands now size llama.cpp and give one verdict."""
    wl = ["--context", "32k", "--concurrency", "4"]
    code_i, inf = answer(["infer", "llama-3.1-8b", "--device", "rtx-4090", *wl], capsys)
    code_f, fit = answer(["fit", "llama-3.1-8b", "--device", "rtx-4090", *wl], capsys)
    _, old = answer(["infer", "llama-3.1-8b", "--device", "rtx-4090", *wl, "--engine", "transformers"], capsys)
    assert totals(old) != totals(inf)  # the question the two commands used to answer differently
    assert (code_i, totals(inf), inf["details"]["fits"]) == (code_f, totals(fit["memory"]), fit["fits"])


def test_text_output_names_the_default_and_its_reason(capsys):
    code, out, err = run(["infer", MODEL, "--device", "h100-sxm"], capsys)
    assert code == 0, err
    assert "engine=vllm (default for h100-sxm: vLLM on data-center accelerators)" in out
    code, out, err = run(["fit", MODEL, "--device", "h100-sxm"], capsys)
    assert "engine=vllm (default for h100-sxm: vLLM on data-center accelerators)" in out


def test_with_no_device_the_rule_has_no_form_factor_and_says_so(capsys):
    _, inf = answer(["infer", MODEL], capsys)
    engine = assumed(inf)["engine"]
    assert engine["value"] == "transformers" and engine["default"]
    assert engine["why"].startswith("default for gpu:") and "known only by its kind" in engine["why"]
    _, gen = answer(["infer", MODEL, "--device", "gpu"], capsys)
    assert totals(gen) == totals(inf) and assumed(gen)["engine"] == engine


def test_the_format_decides_before_the_device(capsys):
    """GGUF weights run on llama.cpp on any device; AWQ on vLLM on a GPU, on transformers on a CPU."""
    for device, weights, engine in (("h100-sxm", "q4_k_m", "llamacpp"), ("rtx-4090", "awq-int4", "vllm"),
                                    ("intel-xeon-platinum-8488c", "awq-int4", "transformers")):
        mem = ["--memory", "64GiB"] if device.startswith("intel") else []
        _, inf = answer(["infer", MODEL, "--device", device, "--weights", weights, *mem], capsys)
        _, fit = answer(["fit", MODEL, "--device", device, "--weights", weights, *mem], capsys)
        assert assumed(inf)["engine"]["value"] == fit["engine"] == engine
        assert totals(inf) == totals(fit["memory"])


def test_a_stated_engine_is_kept(capsys):
    _, inf = answer(["infer", MODEL, "--device", "h100-sxm", "--engine", "transformers"], capsys)
    assert assumed(inf)["engine"]["value"] == "transformers" and not assumed(inf)["engine"]["default"]


def test_engine_settings_are_checked_against_the_chosen_engine(capsys):
    """--ubatch (llama.cpp's -ub) with no engine: taken on a CPU (llama.cpp is the default there); on an H100 (vLLM
    by default) it implies llama.cpp, the one engine that reads it; with --engine vllm it is refused with the same
    line by infer and fit."""
    _, inf = answer(["infer", MODEL, "--device", "cpu", "--memory", "32GiB", "--ubatch", "256"], capsys)
    assert inf["details"]["n_ubatch"] == 256
    _, implied = answer(["infer", MODEL, "--device", "h100-sxm", "--ubatch", "256"], capsys)
    eng = assumed(implied)["engine"]
    assert eng["value"] == "llamacpp" and eng["why"].startswith("implied by n_ubatch")
    lines = []
    for cmd in ("infer", "fit"):
        code, out, err = run([cmd, MODEL, "--device", "h100-sxm", "--engine", "vllm", "--ubatch", "256"], capsys)
        assert code == 2 and out == ""
        lines.append(err.strip().splitlines())
    assert lines[0] == lines[1] == ["llmsizer: error: --ubatch applies to engine llamacpp, not vllm"]  # the flag (errors.FieldError)


def test_a_cpu_instances_ram_is_named_as_the_budgets_source(capsys):
    _, inf = answer(["infer", MODEL, "--device", "aws-m7i.4xlarge"], capsys)
    _, fit = answer(["fit", MODEL, "--device", "aws-m7i.4xlarge"], capsys)
    inst = load_catalog().find("aws-m7i.4xlarge")
    for d in (inf, fit):
        mem = assumed(d)["device_memory"]
        assert mem["why"].startswith("aws-m7i.4xlarge RAM: ") and inst.memory.source in mem["why"]
        assert mem["default"]  # the catalog's, not the user's
    assert inf["details"]["memory_budget"] == int(inst.memory.base * 0.9)


# ----------------------------------------------------------------------------------- the Python API == the CLI

@pytest.mark.parametrize("device, memory", DEVICES)
def test_python_api_takes_the_same_device_names_and_answers_the_same(device, memory, capsys):
    kw = {"memory": int(memory.removesuffix("GiB")) * 2**30} if memory else {}
    est = llmsizer.estimate_inference(MODEL, device=device, **kw)
    _, cli = answer(["infer", MODEL, "--device", device, *(["--memory", memory] if memory else [])], capsys)
    assert json.loads(json.dumps(est.to_dict(), default=str)) == cli


@pytest.mark.parametrize("device, memory", [("rtx-4090", None), ("h100-sxm", None), ("cpu", "256GiB"),
                                            ("aws-m7i.4xlarge", None)])
def test_python_training_api_takes_the_same_device_names(device, memory, capsys):
    kw = {"memory": int(memory.removesuffix("GiB")) * 2**30} if memory else {}
    est = llmsizer.estimate_training(MODEL, device=device, method="lora", **kw)
    _, cli = answer(["train", MODEL, "--device", device, "--method", "lora",
                     *(["--memory", memory] if memory else [])], capsys)
    assert totals(est.to_dict()) == totals(cli)
    assert est.details["memory_budget"] == cli["details"]["memory_budget"]
    assert est.details["fits"] == cli["details"]["fits"]


def test_a_workload_object_gets_the_same_default():
    spec = llmsizer.load_model(MODEL)
    a = llmsizer.estimate_inference(spec, InferenceWorkload(device="cpu", memory=32 * 2**30))
    b = llmsizer.estimate_inference(spec, device="cpu", memory=32 * 2**30)
    assert a.to_dict() == b.to_dict()
    engine = {x.name: x for x in a.assumptions}["engine"]
    assert engine.value == engine_rule(load_catalog().device("cpu"), 1, None, None, {})[0] == "llamacpp" and engine.default


def test_cpu_and_gpu_resolve_as_the_catalog_would_without_loading_it():
    from llmsizer.estimate.device import resolve_target
    for kind in ("cpu", "gpu", " GPU "):
        assert resolve_target(kind)[0] is load_catalog().find(kind)


def test_python_api_refuses_an_instance_of_several_devices_in_one_line():
    with pytest.raises(llmsizer.InputError) as e:
        llmsizer.estimate_inference(MODEL, device="aws-p5.48xlarge")
    assert str(e.value) == ("aws-p5.48xlarge is an instance of 8 x h100-sxm; estimate_inference sizes one device: "
                            "name it (device='h100-sxm', with tensor_parallel for a replica over several) or use "
                            "fit(model, 'aws-p5.48xlarge'), which places the model over all 8")
    with pytest.raises(llmsizer.UnknownNameError, match="unknown hardware 'rtx-4909'; closest: rtx-4090"):
        llmsizer.estimate_inference(MODEL, device="rtx-4909")
