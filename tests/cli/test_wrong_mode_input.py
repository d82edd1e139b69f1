"""Input that belongs to another mode or engine is refused, not ignored (the bad-input rule: one line, exit 2).

Each case below was answered before as if the flag had not been given (exit 0, or a verdict that ignored it): a
serving flag on a training question, a training constraint on a serving search and the reverse, a KV cache type
the engine does not have, zero training tokens. Run through the real entry point, as a user runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_capture import run_cli
from llmsizer.errors import InputError
from llmsizer.specs import InferenceWorkload

SRC = str(Path(__file__).resolve().parents[2] / "src")


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-300:], r.stderr)
    assert r.stdout == "" and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


# ------------------------------------------------------------------------- serving flags on a training question

@pytest.mark.parametrize(("command", "flags", "named"), [
    (["fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--train"], ["--context", "64k"], "--context"),
    (["fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--train"], ["--engine", "sglang", "--concurrency", "8"],
     "--concurrency, --engine"),
    (["fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--train"], ["--weights", "q4_k_m"], "--weights"),
    (["fit", "qwen3-vl-4b-instruct", "--device", "h100-sxm", "--train"], ["--images", "2"], "--images"),
    (["fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--train"], ["--block-size", "32"], "--block-size"),
    (["fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--train"], ["--host-device", "desktop-ddr5-4800-2ch"],
     "--host-device"),
    (["recommend", "qwen2.5-0.5b", "--train", "--tokens", "1B"], ["--context", "64k"], "--context"),
    (["recommend", "qwen2.5-0.5b", "--train", "--tokens", "1B"], ["--engine", "sglang"], "--engine"),
    (["recommend", "qwen2.5-0.5b", "--train", "--tokens", "1B"], ["--kv-unified"], "--kv-unified"),
])
def test_a_serving_flag_with_train_is_refused_naming_it(command, flags, named):
    err = one_line_error(run_cli(*command, *flags))
    assert named in err and "--train" in err, err


def test_training_flags_shared_with_serving_still_work_with_train():
    # --attention is both a serving and a training flag; fit's --gpus/--tp are the training ones
    r = run_cli("fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--count", "2", "--train", "--attention", "eager",
                "--gpus", "2", "--tp", "2", "--json")
    assert r.returncode in (0, 1), r.stderr


# ------------------------------------------------------------------------- constraints of the other mode

@pytest.mark.parametrize(("args", "named"), [
    (["recommend", "qwen2.5-0.5b", "--deadline", "3d"], "deadline"),
    (["recommend", "qwen2.5-0.5b", "--max-cost", "10"], "max_cost"),
    (["recommend", "qwen2.5-0.5b", "--train", "--tokens", "1B", "--max-ttft", "0.001"], "max_ttft"),
    (["recommend", "qwen2.5-0.5b", "--train", "--tokens", "1B", "--user-tokens-per-second", "10000"],
     "user_tokens_per_second"),
    (["recommend", "qwen2.5-0.5b", "--train", "--tokens", "1B", "--tokens-per-second", "10000"],
     "tokens_per_second"),
])
def test_a_constraint_of_the_other_mode_is_refused_not_ignored(args, named):
    # before: exit 0 with every option "meeting every constraint", the stated one never checked
    err = one_line_error(run_cli(*args))
    assert named in err, err


def test_the_python_api_refuses_the_same_constraints():
    from llmsizer.recommend import Constraints, best_option_on, recommend_inference, recommend_training
    with pytest.raises(InputError, match="deadline"):
        recommend_inference("qwen2.5-0.5b", constraints=Constraints(deadline=3600))
    with pytest.raises(InputError, match="max_cost"):
        best_option_on("qwen2.5-0.5b", "h100-sxm", constraints=Constraints(max_cost=10))
    with pytest.raises(InputError, match="max_ttft"):
        recommend_training("qwen2.5-0.5b", tokens=10**9, constraints=Constraints(max_ttft=0.5))


# ------------------------------------------------------------------------- KV cache type the engine does not have

@pytest.mark.parametrize(("engine", "kv_dtype", "weights"), [
    ("vllm", "q4_0", None),        # a GGML block type: llama.cpp's -ctk/-ctv only
    ("sglang", "q8_0", None),
    ("transformers", "iq4_nl", None),
    ("transformers", "fp8_e5m2", None),  # no QuantizedCache backend stores float8_e5m2 (cache_utils.py L1018)
    ("llamacpp", "fp8", "q4_k_m"),  # llama.cpp has no fp8 cache type (common/arg.cpp kv_cache_types)
    ("llamacpp", "int8", "q4_k_m"),
])
def test_a_kv_dtype_the_engine_lacks_is_refused(engine, kv_dtype, weights):
    w = ["--weights", weights] if weights else []
    err = one_line_error(run_cli("infer", "llama-3.1-8b", "--engine", engine, "--kv-dtype", kv_dtype, *w))
    assert kv_dtype in err and engine in err, err
    err2 = one_line_error(run_cli("fit", "llama-3.1-8b", "--device", "h100-sxm", "--engine", engine, "--kv-dtype",
                                  kv_dtype, *w))
    assert err2 == err


@pytest.mark.parametrize(("engine", "kv_dtype", "weights"), [
    ("vllm", "fp8", None), ("vllm", "fp8_e5m2", None), ("sglang", "fp8_e4m3", None), ("vllm", "bf16", None),
    ("llamacpp", "q8_0", "q4_k_m"), ("llamacpp", "q4_0", "q4_k_m"), ("llamacpp", "f16", "q4_k_m"),
    ("llamacpp", "bf16", "q4_k_m"), ("transformers", "fp16", None),
])
def test_the_engines_own_kv_dtypes_still_answer(engine, kv_dtype, weights):
    import llmsizer
    est = llmsizer.estimate_inference("llama-3.1-8b", engine=engine, kv_dtype=kv_dtype, weights=weights)
    assert est.item("kv_cache").bytes > 0


# ------------------------------------------------------------------------- zero training tokens

@pytest.mark.parametrize("command", [
    ["fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--train"],  # before: exit 0 with no duration
    ["recommend", "qwen2.5-0.5b", "--train"],  # before: "--train needs --tokens" although it was given
])
def test_zero_training_tokens_is_out_of_range(command):
    err = one_line_error(run_cli(*command, "--tokens", "0"))
    assert "--tokens" in err and "out of range" in err, err


# ------------------------------------------------------------------------- "did you mean" names the command's own options

def test_did_you_mean_suggests_only_an_option_of_the_command_given():
    # before: `models --fits-on l4 --images 1` suggested '--layers', an option of `inspect` (registered by the same
    # module), which `models` refuses in turn
    # (`models --fits-on` now takes --images; --layer, close to inspect's --layers, keeps the case)
    err = one_line_error(run_cli("models", "--fits-on", "l4", "--layer", "1"))
    assert "unrecognized arguments: --layer" in err and "--layers" not in err, err
    err = one_line_error(run_cli("models", "--fits-on", "l4", "--contxt", "8k"))
    assert "did you mean '--context'" in err, err
    err = one_line_error(run_cli("hardware", "list", "--jsn"))
    assert "did you mean '--json'" in err, err


def test_python_dash_m_llmsizer_is_the_cli():
    # before: "No module named llmsizer.__main__; 'llmsizer' is a package and cannot be directly executed"
    r = subprocess.run([sys.executable, "-m", "llmsizer", "infer", "qwen2.5-0.5b", "--concurrency", "0"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=SRC), timeout=120)
    assert r.returncode == 2 and "--concurrency" in r.stderr, r.stderr
    assert run_cli("infer", "qwen2.5-0.5b", "--json").stdout == subprocess.run(
        [sys.executable, "-m", "llmsizer", "infer", "qwen2.5-0.5b", "--json"], capture_output=True, text=True,
        env=dict(os.environ, PYTHONPATH=SRC), timeout=120).stdout


# ------------------------------------------------------------------------- fit --host-device

@pytest.mark.parametrize(("extra", "named"), [
    (["--engine", "llamacpp", "--host-device", "foo"], "unknown hardware 'foo'"),  # before: exit 0, all layers on GPU
    (["--engine", "llamacpp", "--host-device", "h100-sxm"], "must be a CPU"),
    (["--engine", "vllm", "--host-device", "desktop-ddr5-4800-2ch"], "llamacpp"),  # before: ignored, exit 0
])
def test_host_device_is_checked_even_when_no_layer_runs_on_the_cpu(extra, named):
    err = one_line_error(run_cli("fit", "qwen2.5-0.5b", "--device", "rtx-4090", *extra))
    assert named in err, err


# ------------------------------------------------------------------------- a training option on a serving command

@pytest.mark.parametrize("flags", [["--method", "lora"], ["--optimizer", "adamw"], ["--micro-batch", "4"],
                                   ["--grad-checkpointing", "full"], ["--zero", "3"],
                                   ["--batch", "4"], ["--seq", "4096"]])  # train's spellings of micro_batch, seq_len
def test_a_training_option_on_infer_points_at_training(flags):
    """`infer --method lora`: a flag of `train` (the train parser takes it) that serving has not. Before, argparse's
    closest spelling ("did you mean '--metric'"); now where training is sized, from the table the Python API's
    refusal reads (InferenceWorkload.ELSEWHERE)."""
    from llmsizer.cli.main import build_parser
    train = next(a for a in build_parser(["train"])._actions if a.dest == "command").choices["train"]
    assert any(flags[0] in a.option_strings for a in train._actions)  # a real training flag
    err = one_line_error(run_cli("infer", "llama-3.1-8b", *flags))
    assert f"{flags[0]} is a training option" in err and "did you mean" not in err, err
    assert "`llmsizer train`" in err and "`llmsizer fit --train`" in err, err


def test_several_training_options_are_named_in_one_line():
    err = one_line_error(run_cli("infer", "llama-3.1-8b", "--optimizer", "adamw", "--rank", "8"))
    assert "--optimizer is a training option" in err and "(so is --rank)" in err, err


def _options(*command: str) -> set[str]:
    """The options of ``llmsizer COMMAND...`` as its real parser holds them."""
    import argparse

    from llmsizer.cli.main import build_parser
    p = build_parser(list(command))
    for word in command:
        p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
    return {o for a in p._actions for o in a.option_strings}


@pytest.mark.parametrize("field", sorted(InferenceWorkload.ELSEWHERE))
def test_every_training_hint_names_flags_the_named_commands_have(field):
    """Each word's hint names commands and flags that exist: before, `infer --lora 8` was sent to `llmsizer train`,
    which has no --lora, and `infer --train` to train, which has no --train. Checked against the real parsers."""
    import re
    flag = "--" + field.replace("_", "-")
    err = one_line_error(run_cli("infer", "llama-3.1-8b", flag, *([] if field == "train" else ["1"])))
    assert f"{flag} is a training option" in err, err
    named = re.findall(r"`(llmsizer [^`]*|--[^`]*)`", err)
    commands = [n.split()[1:] for n in named if n.startswith("llmsizer")]
    assert ["train"] in commands and ["fit", "--train"] in commands, err
    spelt = [n for n in named if n.startswith("--")]  # a word spelt otherwise: --method lora --rank N
    flags = [w for n in spelt for w in n.split() if w.startswith("--")] or ([] if field == "train" else [flag])
    assert (field == "lora") == bool(spelt), err
    for flag_ in flags:
        assert flag_ in _options("train") and flag_ in _options("fit"), (flag_, err)
    assert "--train" in _options("fit") and "--train" not in _options("infer")


@pytest.mark.parametrize("argv", [
    ("train", "qwen2.5-0.5b", "--lora", "8"),
    ("fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--train", "--lora", "8"),
    ("recommend", "qwen2.5-0.5b", "--train", "--tokens", "1B", "--lora", "8")])
def test_a_training_command_is_not_sent_to_training(argv):
    """`train --lora 8` said "--lora is a training option: training is sized by `llmsizer train`" (the command just
    run); a training command now says how it spells a LoRA rank, flags it has."""
    err = one_line_error(run_cli(*argv))
    assert "training option" not in err and "did you mean '--method lora --rank N'?" in err, err
    assert {"--method", "--rank"} <= _options(*argv[:1])


@pytest.mark.parametrize(("argv", "flag"), [(("hardware", "list", "--rank", "8"), "--rank"),
                                            (("models", "--optimizer", "adamw"), "--optimizer"),
                                            (("inspect", "qwen2.5-0.5b", "--method", "lora"), "--method")])
def test_a_command_with_no_workload_gets_argparse_s_own_error(argv, flag):
    err = one_line_error(run_cli(*argv))
    assert f"unrecognized arguments: {flag}" in err and "training" not in err, err


def test_fit_without_train_still_points_a_lora_rank_at_training():
    err = one_line_error(run_cli("fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--lora", "8"))
    assert "--lora is a training option: a LoRA fine-tune is `--method lora --rank N`" in err, err


def test_a_misspelt_serving_option_still_gets_did_you_mean():
    err = one_line_error(run_cli("infer", "llama-3.1-8b", "--metod", "x"))
    assert "did you mean '--metric'" in err and "training" not in err, err


# ------------------------------------------------------------------------- an engine setting another engine does not read

@pytest.mark.parametrize("engine", ["vllm", "sglang", "llamacpp"])
def test_attention_on_an_engine_that_does_not_read_it_is_refused(engine):
    """--attention is transformers' attn_implementation (estimate/inference/hf_transformers.py is the only serving
    profile that reads it); before, `--engine vllm --attention eager` answered exit 0 with the same numbers."""
    w = ["--weights", "q4_k_m"] if engine == "llamacpp" else []
    err = one_line_error(run_cli("infer", "llama-3.1-8b", "--engine", engine, "--attention", "eager", *w))
    assert err == f"llmsizer: error: --attention applies to engine transformers, not {engine}\n", err
    import llmsizer
    from llmsizer.errors import FieldError
    with pytest.raises(FieldError, match=f"^attention applies to engine transformers, not {engine}$") as e:
        llmsizer.estimate_inference("llama-3.1-8b", engine=engine, attention="eager", weights=w[1] if w else None)
    assert e.value.field == "attention"


def test_attention_on_an_engine_named_is_refused_alike_on_every_surface():
    """An engine named that does not read --attention (vLLM): refused in infer, fit and the Python API alike, naming
    the engine that reads it (no engine named: the attention implies transformers, tests/cli/test_implied_engine.py);
    on transformers it answers and is named as given."""
    import llmsizer
    from llmsizer.errors import FieldError
    err = one_line_error(run_cli("infer", "llama-3.1-8b", "--device", "h100-sxm", "--engine", "vllm", "--attention",
                                 "eager"))
    assert "--attention applies to engine transformers, not vllm" in err, err
    err = one_line_error(run_cli("fit", "llama-3.1-8b", "--device", "h100-sxm", "--engine", "vllm", "--attention",
                                 "eager"))
    assert "--attention applies to engine transformers, not vllm" in err, err
    with pytest.raises(FieldError, match="^attention applies to engine transformers, not vllm$"):
        llmsizer.fit("llama-3.1-8b", "h100-sxm", 1, engine="vllm", attention="eager")
    est = llmsizer.estimate_inference("llama-3.1-8b", engine="transformers", attention="eager")
    assert [(a.value, a.default) for a in est.assumptions if a.name == "attention"] == [("eager", False)]
    r = run_cli("infer", "llama-3.1-8b", "--engine", "transformers", "--attention", "eager")
    assert r.returncode == 0 and "attention=eager;" in r.stdout, r.stderr


def test_recommend_asks_for_the_engine_of_a_setting_two_engines_read():
    """recommend's candidates may each run another engine: a setting two engines read (max_num_seqs: vLLM, SGLang)
    needs its engine named; one only transformers reads implies it (tests/cli/test_implied_engine.py)."""
    err = one_line_error(run_cli("recommend", "llama-3.1-8b", "--max-num-seqs", "8"))
    assert "--max-num-seqs is a vLLM or SGLang setting, and candidates may each run a different one by default: give --engine vllm or --engine sglang" in err, err
