"""On Apple, llama.cpp's host-resident token embedding is in the same unified memory as the rest (smalls3 #7): fit said
"1002.00 MiB in host memory (...; not in the device budget)", as on a discrete GPU. What is true: llama.cpp keeps the
input layer in its CPU buffers (src/llama-model.cpp: "always keep it on the CPU"), which on Apple are the one unified
memory, but outside the Metal working set the budget is (recommendedMaxWorkingSetSize's share), so not counted in
it. The embedding's bytes are worked from the config: vocab x hidden x 2 B (bf16)."""

from __future__ import annotations

from cli_capture import run
from llmsizer.models import load_model
from llmsizer.units import format_bytes


def _weights_line(*argv: str) -> str:
    code, out, err = run("fit", "llama-3.1-8b", *argv)
    assert code == 0, err
    return next(x for x in out.splitlines() if x.startswith("  weights "))


def test_apple_says_unified_memory_outside_the_working_set() -> None:
    spec = load_model("llama-3.1-8b")
    embedding = format_bytes(spec.vocab_size * spec.hidden_size * 2)
    line = _weights_line("--device", "apple-m1-max-64gb")
    assert f"{embedding} in llama.cpp's CPU buffers (token embeddings {embedding})" in line
    assert "same unified memory" in line and "outside the GPU working set" in line and "host memory" not in line


def test_a_discrete_gpu_keeps_host_memory() -> None:
    line = _weights_line("--device", "rtx-4090", "--engine", "llamacpp", "--weights", "q4_k_m")
    assert "in host memory" in line and "not in the device budget" in line and "unified" not in line
