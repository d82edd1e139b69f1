"""One answer, from a new user's probe (session 10): the same question asked through `fit`, `models --fits-on`, a
request file, the Python API and the web API. Each test failed before its fix; expected values come from the surface
the question is answered by (fit's own result) or from the catalog's data files, never from the surface under test.
"""

from __future__ import annotations

import pytest

from cli_capture import run

# ----------------------------------------------------------------- "what fits" on a device of unknown bandwidth


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_what_fits_on_a_device_of_unknown_bandwidth_is_answered_on_memory(device: str) -> None:
    """`fit qwen2.5-0.5b --device cpu --memory 32GiB` FITS (exit 0; "decode speed cannot be estimated"). Session 10
    made `models --fits-on cpu --memory 32GiB` exit 2 (no bandwidth for the reading-speed floor) although the help
    names `--fits-on gpu`; session 12 answers it: each model judged on memory only, speed "unknown", the reason said
    once. Every model's verdict, format and memory are fit's own for that model and format (the surface this
    question is answered by); the web returns the CLI's JSON."""
    import json

    code, out, _ = run("fit", "qwen2.5-0.5b", "--device", device, "--memory", "32GiB")
    assert code == 0 and "FITS" in out and "no sourced memory bandwidth" in out
    code, out, err = run("models", "qwen2.5", "--fits-on", device, "--memory", "32GiB")
    assert code == 0 and err == "", err
    assert "fits in memory (decode speed unknown" in out.splitlines()[0], out.splitlines()[0]
    warnings = [ln for ln in out.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 1 and f"{device} has no sourced memory bandwidth" in warnings[0], warnings
    assert "--hardware-file" in warnings[0]
    rows = [ln for ln in out.splitlines() if ln.endswith(" yes")]
    assert rows and all(" unknown " in ln for ln in rows), rows
    code, jout, _ = run("models", "qwen2.5", "--fits-on", device, "--memory", "32GiB", "--json")
    data = json.loads(jout)
    assert code == 0 and len(data["warnings"]) == 1
    fitting = [m for m in data["models"] if m["status"] == "meets"]
    assert len(fitting) == len(rows)
    for m in fitting:
        assert m["tokens_per_second_per_user"] is None and data["warnings"][0] in m["reasons"]
        fcode, fout, _ = run("fit", m["id"], "--device", device, "--memory", "32GiB", "--weights",
                             m["weights_format"], "--engine", m["engine"], "--json")
        fr = json.loads(fout)
        assert fcode == 0 and fr["fits"] and fr["memory_per_device"] == m["memory_per_device"], (m["id"], fr)
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.get("/api/v1/models/fits-on", params={"fits_on": device, "memory": "32GiB", "query": "qwen2.5"})
    assert r.status_code == 200 and r.json() == data


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_a_decode_speed_asked_on_a_device_of_unknown_bandwidth_is_refused(device: str) -> None:
    """A speed the caller asks for (not the reading-speed floor ``models --fits-on`` applies by itself) cannot be
    checked without a bandwidth: one line naming what to give, not every model "no: speed unknown"."""
    from llmsizer.errors import InputError
    from llmsizer.recommend import Constraints, best_option_on
    from llmsizer.units import GiB

    with pytest.raises(InputError, match=f"^{device} has no sourced memory bandwidth, so no model's decode speed "
                                         "can be checked against 20 tokens/s; give its memory_bandwidth"):
        best_option_on("qwen2.5-0.5b", device, memory=32 * GiB, constraints=Constraints(user_tokens_per_second=20))


def test_what_fits_with_unknown_bandwidth_still_answers_a_ttft_only_question() -> None:
    """A speed question bandwidth does not enter (recommend's max TTFT on a catalog CPU) is still answered: the
    refusal is for the decode-speed checks only."""
    from llmsizer.recommend import Constraints, best_option_on
    from llmsizer.units import GiB

    opt = best_option_on("qwen2.5-0.5b", "intel-xeon-platinum-8488c", memory=32 * GiB,
                         constraints=Constraints(max_ttft=600.0))
    assert opt.status == "meets"


# ------------------------------------------------------- the reverse training questions answer what train answers

def _fits(*argv: str) -> bool:
    code, out, err = run("train", *argv)
    assert code in (0, 1), err
    return code == 0


def test_longest_sequence_under_context_parallelism_is_one_train_accepts_and_fits() -> None:
    """`train llama-3.1-8b --max-seq --memory 80GiB --gpus 8 --fsdp full --context-parallel 2` exited 2 with
    "seq_len (9886) must be a multiple of 2 x context_parallel (4)": the search tried lengths context parallelism
    refuses and reported its own probe as the user's bad input. The answer is a length `train --seq` takes that
    fits, the next one it takes (+2 x cp) not."""
    flags = ("llama-3.1-8b", "--memory", "80GiB", "--gpus", "8", "--fsdp", "full", "--context-parallel", "2")
    code, out, err = run("train", *flags, "--max-seq")
    assert code == 0, err
    n = int(out.rsplit("longest sequence that fits: ", 1)[1].split(" tokens")[0].replace(",", ""))
    assert n > 0 and n % 4 == 0
    assert _fits(*flags, "--seq", str(n)) and not _fits(*flags, "--seq", str(n + 4))


def test_no_sequence_fits_names_the_shortest_length_tried() -> None:
    """When nothing fits under context parallelism the line said "even 1 token does not", a length train --seq
    refuses: the shortest length the search tries is 2 x cp (4 at cp 2), and train --seq 4 indeed does not fit."""
    flags = ("llama-3.1-70b", "--memory", "8GiB", "--gpus", "8", "--fsdp", "full", "--context-parallel", "2")
    code, out, _ = run("train", *flags, "--max-seq")
    assert code == 1 and "even 4 token(s) do not" in out, out
    assert not _fits(*flags, "--seq", "4")


def test_largest_micro_batch_is_not_capped_below_what_train_accepts() -> None:
    """`train smollm2-135m --max-batch --memory 1000TiB --seq 128` answered 65,536 (a 2^16 search ceiling), while
    `train ... --batch 100000` fits (17.55 TiB of a 900 TiB budget): the answer is the largest batch --batch takes
    that fits, not a ceiling of the search."""
    flags = ("smollm2-135m", "--memory", "1000TiB", "--seq", "128")
    assert _fits(*flags, "--batch", "100000")
    code, out, err = run("train", *flags, "--max-batch")
    assert code == 0, err
    b = int(out.rsplit("largest micro-batch that fits: ", 1)[1].split(" sequences")[0].replace(",", ""))
    assert b >= 100000 and _fits(*flags, "--batch", str(b))
    code, _, err = run("train", *flags, "--batch", str(b + 1))  # past it: refused as input, or does not fit
    assert code == 2 or (code == 1), err


# ------------------------------------------------------------- a release newer than the data, on every surface

def test_a_newer_release_is_warned_on_recommend_and_fits_on_as_on_fit_and_once() -> None:
    """`fit ... --engine vllm --engine-version 99.0` warns that the rules of the newest release with data are
    applied (and printed that warning twice: the memory and the speed estimate each carry it); `recommend` and
    `models --fits-on` with the same flags timed every option by the same rule and said nothing, text or JSON."""
    code, out, _ = run("fit", "llama-3.1-8b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version", "99.0",
                       "--json")
    assert code == 0
    import json
    warning = next(w for w in json.loads(out)["warnings"] if "99.0" in w)
    code, out, _ = run("fit", "llama-3.1-8b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version", "99.0")
    assert code == 0 and out.count(warning) == 1
    flags = ("--engine", "vllm", "--engine-version", "99.0")
    for argv in (("recommend", "llama-3.1-8b", *flags), ("models", "qwen2.5", "--fits-on", "h100-sxm", *flags)):
        code, out, err = run(*argv)
        assert code == 0 and out.count(f"warning: {warning}\n") == 1, (argv, err)
        code, out, err = run(*argv, "--json")
        # once; recommend also says the other warnings fit says of its choice (a T4: bf16 run as fp16)
        assert code == 0 and json.loads(out)["warnings"].count(warning) == 1, (argv, err)
        if argv[0] == "models":
            assert json.loads(out)["warnings"] == [warning], (argv, err)


@pytest.mark.parametrize("setting", [("--engine-version", "0.4"), ("--mem-fraction-static", "0.8")])
def test_recommend_refuses_a_setting_of_another_engine_with_fits_words(setting: tuple[str, str]) -> None:
    """`recommend llama-3.1-8b --engine llamacpp --engine-version 0.4` said "give engine vllm (--engine vllm)" though
    an engine was given; `fit` with the same flags names the engine it does not apply to."""
    _, _, fit_err = run("fit", "llama-3.1-8b", "--device", "h100-sxm", "--engine", "llamacpp", *setting)
    code, out, err = run("recommend", "llama-3.1-8b", "--engine", "llamacpp", *setting)
    assert (code, out) == (2, "") and err == fit_err and "not llamacpp" in err


# ------------------------------------------------------------------ the workload defaults are named where applied

@pytest.mark.parametrize("argv", [("infer", "llama-3.1-8b"), ("infer", "llama-3.1-8b", "--engine", "vllm",
                                                                 "--memory", "80GiB"),
                                  ("fit", "llama-3.1-8b", "--device", "h100-sxm"),
                                  ("fit", "llama-3.1-8b", "--device", "rtx-4090")])
def test_default_context_concurrency_and_output_are_named_in_the_assumptions(argv: tuple[str, ...]) -> None:
    """`infer llama-3.1-8b` sized a KV cache of 4096 tokens x 1 sequence and `fit` timed a TTFT over 3840 prompt
    tokens, and neither named context, concurrency (nor, on fit, the output tokens) among the assumptions, which
    name every other default (weights, kv_dtype, ...). Given, they are named as given, not marked as defaults
    (cliwords: every input the answer used is named; before, a given one was left out)."""
    _, out, _ = run(*argv)
    line = next(ln for ln in out.splitlines() if ln.startswith("assumptions: "))
    assert "context=4096 (default)" in line and "concurrency=1 (default)" in line, line
    if argv[0] == "fit":
        assert "output_tokens=256 (default)" in line, line
    _, out, _ = run(*argv, "--context", "4096", "--concurrency", "1", "--output-tokens", "256")
    line = next(ln for ln in out.splitlines() if ln.startswith("assumptions: "))
    assert "context=4096;" in line and "concurrency=1;" in line, line
    assert "(default)" not in "".join(x for x in line.split("; ") if x.startswith(("context=", "concurrency=",
                                                                                    "output_tokens="))), line
