"""`fit qwen3-30b-a3b --device rtx-4090 --context 32k` (probe4 finding 1): the default gguf:bf16 (60 GiB) does not fit,
and the answer never said that Q4_K_M does, while printing a speed table for a setup that cannot run. Now a default
format that does not fit names the best format that does (recommend's search), in text and JSON, and labels the
speed. The truth each hint is checked against is fit itself at every rung of llama.cpp's format ladder."""

from __future__ import annotations

from cli_run import answer

from cli_capture import run
from llmsizer.estimate.formats import format_ladder
from llmsizer.models import load_model

ARGV = ["fit", "qwen3-30b-a3b", "--device", "rtx-4090", "--context", "32k"]


def test_the_hint_is_the_first_rung_that_fits(capsys) -> None:
    code, data = answer(ARGV, capsys)
    assert code == 1 and data["fits"] is False
    hint = data["fits_at"]
    assert hint is not None
    ladder = format_ladder(load_model("qwen3-30b-a3b"), "llamacpp", None, fp8=False)
    verdicts = [answer([*ARGV, "--weights", f], capsys)[1]["fits"] for f in ladder]
    first = ladder[verdicts.index(True)]
    assert hint["weights"] == first and hint["engine"] == "llamacpp"
    asked = answer([*ARGV, "--weights", first], capsys)[1]
    assert hint["memory_per_device"] == asked["memory_per_device"]


def test_text_names_the_format_and_labels_the_speed() -> None:
    code, out, _ = run(*ARGV)
    assert code == 1
    assert "hint: it fits at --weights q4_k_m" in out
    assert "speed if it fit (it does not, at gguf:bf16" in out
    code, out, _ = run(*ARGV, "--weights", "bf16")  # a format the user named: answered as asked, no hint
    assert code == 1 and "hint:" not in out
    code, out, _ = run(*ARGV, "--weights", "q4_k_m")
    assert code == 0 and "hint:" not in out and "speed if it fit" not in out
