"""One answer and clear errors on every surface (task `surfaces`): each case failed before its fix.

1. A setting two engines read (max_num_seqs: vLLM or SGLang) with no engine named: the device's default engine is
   kept where it reads the setting (a data-center GPU: vLLM, stated as the default), else refused naming the readers
   and asking for the engine (before: "--max-num-seqs applies to engine vllm or sglang, not transformers", an engine
   the user never chose, and recommend said "give engine vllm" without the flag).
2. llama.cpp's host part (host_device, host_memory) read up front by the search (recommend.best_option_on) as fit
   reads it (before: a GPU named as the host or a bare-number memory became every option's rejection reason, and
   another engine ignored them); fit's refusals name the flag (before: "host_device applies ...", the Python name).
4. `infer --attention flex`: the line fit gives (a training choice), not argparse's 'invalid choice'.
6. New-user odds: a negative duration is refused as not positive (before: "cannot read '-1d' as a duration"), and
   recommend given a device, count or memory says the search chooses them (before: "did you mean '--deadline'?").
"""

from __future__ import annotations

import pytest
from cli_run import run

from llmsizer import estimate_inference
from llmsizer.errors import FieldError, InputError
from llmsizer.models import load_model
from llmsizer.recommend import best_option_on
from llmsizer.specs.workload import ENGINE_SETTINGS


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0].removeprefix("llmsizer: error: ")


# ------------------------------------------------------------------ 1. a setting two engines read
@pytest.mark.parametrize("argv, default", [
    (["infer", "llama-3.1-8b"], "the default on gpu is transformers"),  # a GPU known only by its kind
    (["fit", "llama-3.1-8b", "--device", "rtx-4090"], "the default on rtx-4090 is llama.cpp"),
])
def test_a_setting_two_engines_read_asks_for_the_engine_the_default_does_not_read(argv, default, capsys) -> None:
    assert ENGINE_SETTINGS["max_num_seqs"] == ("vllm", "sglang")  # the table the rule reads
    code, _, err = run([*argv, "--max-num-seqs", "64"], capsys)
    line = one_line(err)
    assert code == 2 and line.startswith("--max-num-seqs is a vLLM or SGLang setting"), line
    assert default in line and line.endswith("give --engine vllm or --engine sglang"), line


def test_a_setting_two_engines_read_keeps_a_default_that_reads_it(capsys) -> None:
    code, out, err = run(["infer", "llama-3.1-8b", "--device", "h100-sxm", "--max-num-seqs", "64"], capsys)
    assert code == 0, err
    assert "engine=vllm (default for h100-sxm" in out and "max_num_seqs=64" in out
    code, out, err = run(["infer", "llama-3.1-8b", "--max-num-seqs", "64", "--engine", "sglang"], capsys)
    assert code == 0, err  # named: the engine the user chose


def test_python_names_the_fields_the_cli_names_the_flags() -> None:
    with pytest.raises(FieldError, match=r"^max_num_seqs is a vLLM or SGLang setting, .*give engine vllm or engine "
                                         r"sglang$") as e:
        estimate_inference("llama-3.1-8b", max_num_seqs=64)
    assert e.value.fields == ("max_num_seqs", "engine")
    estimate_inference("llama-3.1-8b", max_num_seqs=64, engine="vllm")


def test_recommend_asks_for_the_engine_with_the_flag(capsys) -> None:
    code, _, err = run(["recommend", "llama-3.1-8b", "--max-num-seqs", "8"], capsys)
    assert code == 2 and one_line(err) == ("--max-num-seqs is a vLLM or SGLang setting, and candidates may each run "
                                           "a different one by default: give --engine vllm or --engine sglang")


# ------------------------------------------------------------------ 2. llama.cpp's host part, read up front
@pytest.mark.parametrize("given, said", [
    ({"host_device": "nodev"}, "host_device: unknown hardware 'nodev'"),
    ({"host_device": "h100"}, "host_device must be a CPU from the catalog"),
    ({"host_memory": "24"}, "host_memory: '24' has no unit"),
    ({"host_memory": "-1GB"}, "host_memory: -1GB is out of range"),
    ({"host_memory": "64GB", "engine": "vllm"}, "host_memory applies to engine llamacpp"),
    ({"host_device": "amd-epyc-9654", "engine": "vllm"}, "host_device applies to engine llamacpp"),
])
def test_the_search_reads_the_host_part_up_front(given, said) -> None:
    # before: the first four came back as an option "rejected" with this reason, the last two were ignored (vLLM met)
    with pytest.raises(InputError, match=said):
        best_option_on(load_model("qwen3-30b-a3b"), "rtx-4090", 1, **given)


def test_the_host_part_read_well_still_reaches_the_search() -> None:
    o = best_option_on(load_model("qwen3-30b-a3b"), "rtx-4090", 1, host_memory="64GB", host_device="amd-epyc-9654")
    assert o.engine == "llamacpp"  # they imply llama.cpp (specs/workload.py implied_engine)


@pytest.mark.parametrize("flags, said", [
    (["--host-device", "nodev"], "--host-device: unknown hardware 'nodev'"),
    (["--host-device", "h100"], "--host-device must be a CPU from the catalog"),
    (["--engine", "vllm", "--host-device", "amd-epyc-9654"], "--host-device applies to engine llamacpp"),
])
def test_fit_names_the_host_flag(flags, said, capsys) -> None:
    code, _, err = run(["fit", "llama-3.1-8b", "--device", "h100-sxm", *flags], capsys)
    assert code == 2 and one_line(err).startswith(said), err


# ------------------------------------------------------------------ 4. flex attention: a training choice
def test_flex_on_infer_is_the_line_fit_gives(capsys) -> None:
    code, _, err = run(["infer", "llama-3.1-8b", "--attention", "flex"], capsys)
    code_fit, _, err_fit = run(["fit", "llama-3.1-8b", "--device", "h100-sxm", "--attention", "flex"], capsys)
    assert code == code_fit == 2 and one_line(err) == one_line(err_fit)
    assert "is a training choice" in err and "invalid choice" not in err


# ------------------------------------------------------------------ 6. new-user odds
@pytest.mark.parametrize("value", ["-1d", "-2 h", "0s"])
def test_a_duration_not_positive_says_so(value, capsys) -> None:
    code, _, err = run(["recommend", "llama-3.1-8b", "--train", "--tokens", "1B", "--deadline", value], capsys)
    assert code == 2 and one_line(err) == f"argument --deadline: duration '{value}' must be positive (see --help)"


@pytest.mark.parametrize("flags", [["--device", "h100"], ["--memory", "24GB"], ["--count", "2"]])
def test_recommend_says_it_searches_the_target(flags, capsys) -> None:
    code, _, err = run(["recommend", "llama-3.1-8b", *flags], capsys)
    line = one_line(err)
    assert code == 2 and f"recommend searches the catalog's devices, counts and memory itself (no {flags[0]})" in line
    assert "`llmsizer fit MODEL --device NAME`" in line and "did you mean" not in line


def test_zero_beside_fsdp_names_the_flags_on_the_cli_and_the_fields_in_python(capsys) -> None:
    # probe19 D5: the refusal wrote Python fields ('zero=1..3') on the command line; the CLI names its flags
    from llmsizer import estimate_training
    code, _, err = run(["train", "llama-3.1-8b", "--zero", "3", "--fsdp", "full"], capsys)
    line = one_line(err)
    assert code == 2 and "--zero (3)" in line and "--fsdp ('full')" in line and "zero=" not in line, line
    with pytest.raises(FieldError) as e:
        estimate_training("llama-3.1-8b", zero=3, fsdp="full")
    assert e.value.fields == ("zero", "fsdp") and "zero (3)" in str(e.value) and "--" not in str(e.value)
