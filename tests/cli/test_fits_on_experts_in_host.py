"""`models --fits-on rtx-4090 qwen3-next` said "no" (Q2_K weights alone 27 GiB) while `fit ... --engine llamacpp
--auto` fits it with --n-cpu-moe (probe4 finding 2). Now a rejected MoE model on llama.cpp GPUs carries fit --auto's
own answer (experts_in_host), checked here against fit --auto run on the named format: the two agree."""

from __future__ import annotations

import shlex

from cli_run import answer

from cli_capture import run, run_json


def test_fits_on_names_what_fit_auto_fits(capsys) -> None:
    code, data = answer(["models", "--fits-on", "rtx-4090", "qwen3-next", "--context", "128k"], capsys)
    (m,) = data["models"]
    assert m["status"] == "rejected"  # every expert on the GPU does not fit: unchanged
    h = m["experts_in_host"]
    assert h is not None and h["n_cpu_moe"] > 0
    _, auto = answer(["fit", "qwen3-next-80b-a3b-thinking", "--device", "rtx-4090", "--engine", "llamacpp",
                      "--weights", h["weights"], "--context", "128k", "--auto"], capsys)
    assert auto["fits"] is True and auto["flags"] == h["flags"] and auto["n_cpu_moe"] == h["n_cpu_moe"]
    code, out, _ = run("models", "--fits-on", "rtx-4090", "qwen3-next", "--context", "128k")
    assert "fits with experts in host memory" in out and "--auto" in out


def test_a_dense_model_gets_no_such_claim(capsys) -> None:
    _, data = answer(["models", "--fits-on", "rtx-4090", "llama-3.1-70b-instruct"], capsys)
    (m,) = data["models"]
    assert m["status"] == "rejected" and m["experts_in_host"] is None


ASKED = ("--context", "32k", "--concurrency", "4", "--kv-dtype", "q8_0")


def test_the_printed_fit_auto_command_gives_the_same_flags() -> None:
    # before: the printed command kept only --context, and ran at one sequence in f16 KV (--n-cpu-moe 11, not 13)
    _, data = run_json("models", "--fits-on", "rtx-4090", "qwen3-next", *ASKED)
    h = data["models"][0]["experts_in_host"]
    _, out, _ = run("models", "--fits-on", "rtx-4090", "qwen3-next", *ASKED)
    (line,) = [ln for ln in out.splitlines() if "fits with experts in host memory" in ln]
    words = shlex.split(line[line.index("llmsizer fit "):line.index(" --auto") + len(" --auto")])
    code, auto = run_json(*words[1:])
    assert code == 0 and auto["fits"] is True
    assert auto["flags"] == h["flags"] and "-np" in auto["flags"] and "4" in auto["flags"]
    assert "--concurrency" in words and "--kv-dtype" in words


def test_the_smallest_format_is_named_so_and_keeps_its_quality_warning() -> None:
    # before: the Q2_K answer stood under "the highest-quality format that fits" without fit --auto's Q2_K warning
    _, data = run_json("models", "--fits-on", "rtx-4090", "qwen3-next", *ASKED)
    h = data["models"][0]["experts_in_host"]
    _, auto = run_json("fit", "qwen3-next-80b-a3b-thinking", "--device", "rtx-4090", "--engine", "llamacpp",
                       "--weights", h["weights"], *ASKED, "--auto")
    quality = [w for w in auto["warnings"] if "costs quality" in w]
    assert quality and h["quality_warning"] == quality[0] and quality[0] in h["warnings"]
    _, out, _ = run("models", "--fits-on", "rtx-4090", "qwen3-next", *ASKED)
    assert "smallest format: least host RAM" in out and f"warning: {quality[0]}" in out
