"""A context past the model's window is refused by vLLM whatever the weight format, so fit's hint names the window,
not a format (smalls3 #3). Before: `fit nemotron-h-56b-base-8k --device h100-sxm --count 2 --engine vllm --context
32k --concurrency 8` said "no format on vllm's ladder fits; it fits on llamacpp at --weights bf16", as if memory were
the reason. The window is the model config's max_position_embeddings (vLLM's derived max_model_len, no rope
scaling in these configs); the hint's remedies are checked by running fit with each of them."""

from __future__ import annotations

import pytest

from cli_capture import run, run_json
from llmsizer.models import load_model

CASES = [
    ["nemotron-h-56b-base-8k", "--device", "h100-sxm", "--count", "2", "--context", "32k", "--concurrency", "8"],
    ["phi-2", "--device", "rtx-4090", "--context", "8k"],
]


@pytest.mark.parametrize("argv", CASES, ids=lambda a: a[0])
def test_the_hint_names_the_window_and_each_remedy_starts_the_engine(argv: list[str]) -> None:
    window = load_model(argv[0]).max_position_embeddings
    code, data = run_json("fit", *argv, "--engine", "vllm")
    assert code == 1 and data["fits"] is False
    assert data["fits_at"] == {"window": {"engine": "vllm", "tokens": window,
                                          "override": "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"}}
    _, out, _ = run("fit", *argv, "--engine", "vllm")
    hint = [line for line in out.splitlines() if line.startswith("hint:")]
    assert hint == [hint[0]] and "no format" not in hint[0] and "--weights" not in hint[0]
    assert f"--context {window} or less" in hint[0] and "--allow-long-context" in hint[0]
    # the remedies: at the window, or with the override, vLLM starts (the verdict is memory's again)
    at = argv[:argv.index("--context")] + ["--context", str(window)] + argv[argv.index("--context") + 2:]
    for remedy in (at, [*argv, "--allow-long-context"]):
        _, again = run_json("fit", *remedy, "--engine", "vllm")
        assert "engine_refusal_reason" not in again["memory"]["details"]
        assert again["fits_at"] is None or "window" not in again["fits_at"]
