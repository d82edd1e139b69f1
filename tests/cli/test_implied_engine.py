"""A setting only one engine reads implies that engine when none is named (specs/workload.py ``implied_engine``).

A new user's `fit qwen3-30b-a3b --device rtx-4090 --count 2 -ts 3,1` was refused with "--tensor-split applies to
engine llamacpp; vllm shards ..." (exit 2): fit's default engine on two consumer cards is vLLM, an engine the user
never chose. Now the llama.cpp setting chooses llama.cpp, said as an assumption, and the answer is the one
`--engine llamacpp` gives for the same flags (the comparison below: two paths through the CLI, neither copied from
llmsizer's output). Settings of two engines together stay an error naming both; an engine named that does not read
the setting is refused naming the one that does. The same in infer, fit, recommend, the Python API and request
files (the web: tests/web/api/test_implied_engine_web.py).
"""

from __future__ import annotations

import pytest

import llmsizer
from cli_capture import run, run_json
from llmsizer.errors import FieldError, InputError

MOE = "qwen3-30b-a3b"


def _engine(answer: dict) -> dict:
    (eng,) = [a for a in answer["assumptions"] if a["name"] == "engine"]
    return eng


def _same_answer(a: dict, b: dict) -> None:
    for key in ("engine", "fits", "memory_per_device", "memory_high_per_device", "budget_per_device",
                "tokens_per_second_total"):
        assert a[key] == b[key], key


@pytest.mark.parametrize("flags, field", [
    (("-ts", "3,1"), "tensor_split"), (("--n-cpu-moe", "4"), "n_cpu_moe"), (("-sm", "row"), "split_mode"),
])
def test_fit_llamacpp_settings_on_two_consumer_cards_imply_llamacpp(flags: tuple[str, ...], field: str) -> None:
    base = ("fit", MOE, "--device", "rtx-4090", "--count", "2", *flags)
    code, implied = run_json(*base)
    assert code in (0, 1), code  # an answer (fits or not), not the refusal (2)
    eng = _engine(implied)
    assert eng["value"] == "llamacpp" and eng["why"].startswith(f"implied by {field}: a llama.cpp setting"), eng
    _, named = run_json(*base, "--engine", "llamacpp")
    _same_answer(implied, named)
    code, out, _ = run(*base)  # the text answer says it in the assumptions line
    assert f"engine=llamacpp (implied by {field}: a llama.cpp setting" in out


def test_fit_attention_on_a_consumer_card_implies_transformers() -> None:
    base = ("fit", "llama-3.1-8b", "--device", "rtx-4090", "--attention", "eager")
    code, implied = run_json(*base)
    assert code in (0, 1)
    assert _engine(implied)["value"] == "transformers"
    _, named = run_json(*base, "--engine", "transformers")
    _same_answer(implied, named)


def test_infer_a_llamacpp_setting_on_a_datacentre_gpu_implies_llamacpp() -> None:
    base = ("infer", "llama-3.1-8b", "--device", "h100-sxm", "-ngl", "20")
    code, implied = run_json(*base)
    _, named = run_json(*base, "--engine", "llamacpp")
    assert code == 0 and _engine(implied)["value"] == "llamacpp"
    assert implied["totals"] == named["totals"]


def test_settings_of_two_engines_are_one_line_naming_both() -> None:
    code, out, err = run("fit", MOE, "--device", "rtx-4090", "--count", "2", "-ts", "3,1",
                         "--gpu-memory-utilization", "0.8")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert ("--gpu-memory-utilization applies to engine vllm and --tensor-split to engine llamacpp: no engine reads "
            "both") in err, err


@pytest.mark.parametrize("cmd", ["infer", "fit"])
def test_an_engine_named_that_does_not_read_it_says_which_does(cmd: str) -> None:
    code, _, err = run(cmd, "llama-3.1-8b", "--device", "rtx-4090", "--engine", "vllm", "--attention", "eager")
    assert code == 2 and "--attention applies to engine transformers, not vllm" in err, err


def test_recommend_takes_the_implied_engine_for_every_candidate() -> None:
    code, rec = run_json("recommend", "llama-3.1-8b", "-ngl", "20", "--provider", "aws")
    assert code in (0, 1)
    assert _engine(rec)["value"] == "llamacpp"
    engines = {o["engine"] for o in (*([rec["chosen"]] if rec["chosen"] else []), *rec["rejected"]) if o["engine"]}
    assert engines == {"llamacpp"}, engines


def test_python_api_implies_the_engine_as_the_cli_does() -> None:
    f = llmsizer.fit(MOE, "rtx-4090", 2, tensor_split=(3, 1))
    named = llmsizer.fit(MOE, "rtx-4090", 2, engine="llamacpp", tensor_split=(3, 1))
    assert f.engine == named.engine == "llamacpp" and f.memory_per_device == named.memory_per_device
    est = llmsizer.estimate_inference("llama-3.1-8b", device="h100-sxm", attention="eager")
    assert [(a.value, a.why.split(":")[0]) for a in est.assumptions if a.name == "engine"] == [
        ("transformers", "implied by attention")]
    with pytest.raises(FieldError) as e:
        llmsizer.fit(MOE, "rtx-4090", 2, tensor_split=(3, 1), gpu_memory_utilization=0.8)
    assert set(e.value.fields) == {"tensor_split", "gpu_memory_utilization"}
    with pytest.raises(FieldError, match="^tensor_split applies to engine llamacpp; vllm shards"):
        llmsizer.fit(MOE, "rtx-4090", 2, engine="vllm", tensor_split=(3, 1))


def test_fits_host_part_implies_llamacpp() -> None:
    """fit's llama.cpp-only flags that are not workload fields (--host-memory) imply it too."""
    f = llmsizer.fit("llama-3.1-8b", "h100-sxm", host_memory="64GiB")
    assert f.engine == "llamacpp"
    with pytest.raises(InputError, match="host_memory applies to engine llamacpp"):
        llmsizer.fit("llama-3.1-8b", "h100-sxm", engine="vllm", host_memory="64GiB")


def test_a_request_files_engine_settings_imply_their_engine() -> None:
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request
    from request.helpers import job_yaml

    text = job_yaml("inference", f"model: {{name: {MOE}}}\nengine_settings:\n  n_cpu_moe: 4\n"
                    "resources: {device: rtx-4090, count: 2}")
    req = parse_request(text, source="r.yaml")  # refused before: "not the default engine; set engine: llamacpp"
    (job,) = req.jobs
    assert job.engine is None  # the file's words as written; the plan takes the implied engine
    plan = make_plan(req, alternatives=False)
    (jp,) = plan.jobs
    (eng,) = [a for a in jp.assumptions if a.name == "engine"]
    assert eng.value == "llamacpp" and eng.why.startswith("implied by n_cpu_moe")


# ------------------------------------------------------------------ a training batch word on a serving question

def test_batch_on_serving_says_concurrency_on_the_cli_and_in_python() -> None:
    code, out, err = run("infer", "llama-3.1-8b", "--batch", "4")
    assert code == 2 and out == "" and "--concurrency" in err and "a training option" in err, err
    cli_hint = err.split("--batch is ", 1)[1].removesuffix(" (see --help)\n")
    for word in ("batch", "micro_batch"):
        with pytest.raises(InputError) as e:
            llmsizer.estimate_inference("llama-3.1-8b", **{word: 4})
        assert str(e.value) == f"InferenceWorkload has no field {word!r}; {cli_hint}"
    code, _, err = run("fit", "llama-3.1-8b", "--device", "rtx-4090", "--batch", "4")
    assert code == 2 and "--concurrency" in err, err


def test_infer_help_offers_servings_attention_list() -> None:
    from llmsizer.specs.workload import ATTENTION_IMPLS
    code, out, _ = run("infer", "--help")
    assert code == 0 and f"--attention {{{','.join(ATTENTION_IMPLS)}}}" in out and ",flex}" not in out
    # flex, training's: the serving workload's own refusal, the line fit gives (not argparse's 'invalid choice')
    code, _, err = run("infer", "llama-3.1-8b", "--attention", "flex")
    code_fit, _, err_fit = run("fit", "llama-3.1-8b", "--device", "h100-sxm", "--attention", "flex")
    assert code == code_fit == 2 and err == err_fit and err.count("\n") == 1, (err, err_fit)
    assert "is a training choice" in err and "serving takes sdpa, flash or eager" in err
