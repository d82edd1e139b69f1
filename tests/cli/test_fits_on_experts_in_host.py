"""`models --fits-on rtx-4090 qwen3-next` said "no" (Q2_K weights alone 27 GiB) while `fit ... --engine llamacpp
--auto` fits it with --n-cpu-moe (probe4 finding 2). Now a rejected MoE model on llama.cpp GPUs carries fit --auto's
own answer (experts_in_host), checked here against fit --auto run on the named format: the two agree."""

from __future__ import annotations

from cli_run import answer

from cli_capture import run


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
