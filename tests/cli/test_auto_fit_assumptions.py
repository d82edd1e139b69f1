"""`fit --auto` names the workload's defaults as plain `fit` does (probe9 #5): the weights (Llama 3.3 70B's
checkpoint is bf16: its config.json torch_dtype), the KV dtype and the concurrency, each marked (default)."""

from __future__ import annotations

from cli_capture import run


def test_auto_fit_text_names_the_defaults() -> None:
    code, out, _ = run("fit", "llama-3.3-70b-instruct", "--engine", "llamacpp", "--device", "rtx-4090", "--auto",
                       "--context", "32k")
    line = next(x for x in out.splitlines() if x.startswith("assumptions: "))
    for named in ("weights=gguf:bf16 (default)", "kv_dtype=fp16 (default)", "concurrency=1 (default)",
                  "fit_target=1.00 GiB (default)"):
        assert named in line, line
    names = [p.split("=", 1)[0] for p in line.removeprefix("assumptions: ").split("; ")]
    assert len(names) == len(set(names))  # each named once
